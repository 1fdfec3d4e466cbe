/**
 * A user's API keys on their page: each key's row with its actions (rotate,
 * disable or enable, revoke) and the form that creates one. Write controls
 * only for write operators.
 *
 * @module
 */
import { api } from "../api.js";
import { badge, field, h, showSecretOnce, toast, when } from "../dom.js";
import { change } from "./shared.js";

/** One API key's row: its facts and, for write operators, rotate, disable or enable, revoke. */
export function keyRow(key, { canWrite: w, rerender }) {
  return h(
    "tr",
    { "data-key-id": key.id },
    h("td", {}, key.id),
    h("td", {}, h("code", { class: "prefix" }, `${key.prefix}…`)),
    h("td", {}, key.label || "—"),
    h(
      "td",
      {},
      badge(key.status),
      key.replaced_by === null
        ? null
        : h("small", { class: "hint" }, ` rotated to key ${key.replaced_by}`),
    ),
    h(
      "td",
      {},
      when(key.last_used_at),
      key.last_used_from ? h("small", {}, ` from ${key.last_used_from}`) : null,
    ),
    h("td", {}, key.use_count),
    h("td", {}, when(key.expires_at)),
    w ? keyActions(key, rerender) : null,
  );
}

/** Rotate, disable or enable, revoke: whichever the key's state allows. */
function keyActions(key, rerender) {
  return h(
    "td",
    { class: "row-actions" },
    key.status === "active" && key.replaced_by === null
      ? h("button", {
        type: "button",
        class: "secondary",
        "aria-label": `Rotate key ${key.id}`,
        onclick: () => rotate(key, rerender),
      }, "Rotate")
      : null,
    key.status === "active" || key.status === "disabled"
      ? h("button", {
        type: "button",
        class: "secondary",
        "aria-label": `${key.status === "active" ? "Disable" : "Enable"} key ${key.id}`,
        onclick: () =>
          change(
            key.status === "active"
              ? `Disable key ${key.id} (${key.prefix}…)? It and its tokens stop working until enabled.`
              : null,
            "Disable key",
            () =>
              api(
                "POST",
                `/keys/${key.id}/${key.status === "active" ? "disable" : "enable"}`,
              ),
            (r) => {
              toast(`Key ${key.id} is ${r.status}`);
              rerender();
            },
          ),
      }, key.status === "active" ? "Disable" : "Enable")
      : null,
    key.status !== "revoked"
      ? h("button", {
        type: "button",
        class: "danger",
        "aria-label": `Revoke key ${key.id}`,
        onclick: () =>
          change(
            `Revoke key ${key.id} (${key.prefix}…)? It and its tokens stop working for good.`,
            "Revoke key",
            () => api("POST", `/keys/${key.id}/revoke`),
            (r) => {
              toast(`Key ${key.id} revoked; ${r.tokens_revoked} token(s) ended`);
              rerender();
            },
          ),
      }, "Revoke")
      : null,
  );
}

/** The rotate dialog: a grace period, then the successor shown once. */
function rotate(key, rerender) {
  const grace = h("input", {
    type: "text",
    name: "grace",
    value: "24h",
    pattern: "0|[0-9]+[smhd]",
  });
  const dialog = h(
    "dialog",
    { class: "dialog", "aria-labelledby": "rotate-title" },
    h(
      "form",
      { method: "dialog" },
      h("h2", { id: "rotate-title" }, `Rotate key ${key.id}`),
      h(
        "p",
        {},
        "A successor is issued; it takes over the key's limits and what their windows have " +
          "used. The old key and its tokens keep working for the grace period, counted against " +
          "the same limits.",
      ),
      field("Grace period", grace, 'Such as "24h", or "0" to end the old key now.'),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          { type: "submit", value: "cancel", class: "secondary", formnovalidate: true },
          "Cancel",
        ),
        h("button", { type: "submit", value: "rotate" }, "Rotate key"),
      ),
    ),
  );
  dialog.addEventListener("close", () => {
    const go = dialog.returnValue === "rotate";
    dialog.remove();
    if (!go) return;
    change(
      null,
      null,
      () => api("POST", `/keys/${key.id}/rotate`, { grace: grace.value.trim() }),
      async (r) => {
        await showSecretOnce(
          `New key ${r.key.id}`,
          `The successor of key ${key.id}. The old key works until ${
            new Date(r.old_key_until).toLocaleString()
          }.`,
          r.api_key,
        );
        rerender();
      },
    );
  });
  document.body.append(dialog);
  dialog.showModal();
  grace.focus();
}

/** The form that creates a key for the user; the key is shown once. */
export function newKeyForm(userId, rerender) {
  const label = h("input", { type: "text", name: "label", maxlength: 200 });
  const expires = h("input", {
    type: "text",
    name: "expires_in",
    placeholder: "never",
    pattern: "[0-9]+[smhd]",
  });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "new-key-title" },
    h("h2", { id: "new-key-title" }, "Create an API key"),
    field("Label", label),
    field("Expires in", expires, 'Such as "90d"; empty for never.'),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Create key")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { label: label.value };
    if (expires.value.trim()) body.expires_in = expires.value.trim();
    change(null, null, () => api("POST", `/users/${userId}/keys`, body), async (r) => {
      await showSecretOnce(`New key ${r.key.id}`, "Give this key to its holder now.", r.api_key);
      rerender();
    });
  });
  return form;
}
