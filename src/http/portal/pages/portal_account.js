// The signed-in user's own account on the portal page: relabel a key, change the e-mail (a
// code goes to the new address, then confirm it here), delete the account (the password and a
// confirmation). Plain DOM, text set with textContent only.
import { call } from "./portal_api.js";
import { el, field, form, toast } from "./portal_dom.js";

/**
 * A key's "Label" button: it swaps the label's cell for a small form that saves a new label
 * (PATCH /keys/ID), then `reload`s the list.
 */
export function labelButton(key, labelCell, reload) {
  return el("button", {
    type: "button",
    class: "secondary",
    text: "Label",
    "data-label": String(key.id),
    onclick: () => {
      const input = el("input", {
        id: `label-${key.id}`,
        name: "label",
        type: "text",
        value: key.label,
        maxlength: "200",
        "aria-label": `New label of key ${key.prefix}…`,
      });
      const editor = el(
        "form",
        {
          class: "inline",
          onsubmit: async (event) => {
            event.preventDefault();
            try {
              await call("PATCH", `/keys/${key.id}`, { label: input.value });
              await reload();
              toast(`Key ${key.prefix}… is now labelled "${input.value.trim()}"`);
            } catch (error) {
              toast(error.message);
            }
          },
        },
        input,
        el("button", { type: "submit", text: "Save", "data-save-label": String(key.id) }),
      );
      labelCell.replaceChildren(editor);
      input.focus();
    },
  });
}

function confirmEmailForm(code, onChanged) {
  return form(
    "confirm-email",
    "Confirm your new e-mail",
    [field("email-code", "Code from the message to the new address", "text", code, {
      name: "code",
      autocomplete: "one-time-code",
    })],
    "Confirm e-mail",
    async (values, status) => {
      const answer = await call("POST", "/email/confirm", values);
      status.textContent = `Your e-mail is now ${answer.email}. The old address got a notice.`;
      onChanged(answer.email);
    },
  );
}

/**
 * Change the e-mail: the new address and the password, then the code mailed to the new
 * address. `pendingCode` (from the mail's link, /portal/email?code=…) opens the second step.
 */
export function emailChangeCard(pendingCode, onChanged) {
  const card = el("section", { class: "card", id: "email-change" });
  const request = form(
    "change-email",
    "Change your e-mail",
    [
      field("new-email", "New e-mail", "email", "", { name: "email", autocomplete: "email" }),
      field("email-password", "Current password", "password", "", {
        name: "password",
        autocomplete: "current-password",
      }),
    ],
    "Send a code",
    async (values, status) => {
      const answer = await call("POST", "/email", values);
      status.textContent = `${answer.message}. Enter its code below.`;
      document.getElementById("confirm-email")?.remove();
      card.append(confirmEmailForm("", onChanged));
    },
  );
  card.append(request);
  if (pendingCode !== null) card.append(confirmEmailForm(pendingCode, onChanged));
  return card;
}

/** Delete the account: the password, then a confirmation; `onDeleted` runs after. */
export function deleteAccountForm(onDeleted) {
  const node = form(
    "delete-account",
    "Delete your account",
    [
      el("p", {
        text: "Your account, its API keys and its access tokens are deleted for good. " +
          "Applications using your keys stop working at once.",
      }),
      field("delete-password", "Current password", "password", "", {
        name: "password",
        autocomplete: "current-password",
      }),
    ],
    "Delete account",
    async (values, status) => {
      if (!confirm("Delete your account, its keys and its tokens? This cannot be undone.")) {
        return;
      }
      const answer = await call("POST", "/account/delete", values);
      status.textContent = "";
      onDeleted(answer);
    },
  );
  node.querySelector("#delete-account-submit").classList.add("danger");
  return node;
}
