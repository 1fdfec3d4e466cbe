// The developer portal's page: sign in, sign up, verify, forgot and reset, and the signed-in
// user's keys, tokens, password, e-mail and account (portal_account.js). Plain DOM, no inline
// code, text set with textContent only.
import { call, setCsrfToken } from "./portal_api.js";
import { deleteAccountForm, emailChangeCard, labelButton } from "./portal_account.js";
import { el, field, form, link, toast } from "./portal_dom.js";

const main = document.getElementById("main");
const who = document.getElementById("who");
const signOutButton = document.getElementById("sign-out");

function show(...nodes) {
  main.replaceChildren(...nodes);
  main.focus();
}

const params = new URLSearchParams(location.search);

function showSignIn() {
  show(form(
    "sign-in",
    "Sign in",
    [
      field("email", "E-mail", "email", "", { autocomplete: "username" }),
      field("password", "Password", "password", "", { autocomplete: "current-password" }),
    ],
    "Sign in",
    async ({ email, password }) => {
      const session = await call("POST", "/signin", { email, password });
      setCsrfToken(session.csrf_token);
      await showAccount();
    },
    [
      el(
        "p",
        {},
        link("#signup", "Create an account"),
        " · ",
        link("#forgot", "Forgot your password?"),
      ),
    ],
  ));
}

function showSignUp() {
  show(form(
    "sign-up",
    "Create an account",
    [
      field("email", "E-mail", "email", "", { autocomplete: "username" }),
      field("password", "Password (at least 10 characters)", "password", "", {
        autocomplete: "new-password",
        minlength: "10",
      }),
    ],
    "Create account",
    async ({ email }, status) => {
      const values = Object.fromEntries(new FormData(document.getElementById("sign-up")));
      const answer = await call("POST", "/signup", values);
      status.textContent = answer.message;
      main.append(verifyForm(email, ""));
    },
    [el("p", {}, link("#", "Back to sign-in"))],
  ));
}

// Verifying signs in too: the code, and the password the account was signed up with (a code
// alone would let whoever signed the address up first choose its password).
function verifyForm(email, code) {
  return form(
    "verify",
    "Verify your e-mail",
    [
      field("email", "E-mail", "email", email, { autocomplete: "username" }),
      field("code", "Code from the message", "text", code, { autocomplete: "one-time-code" }),
      field("password", "The password you signed up with", "password", "", {
        autocomplete: "current-password",
      }),
      el("p", {
        text: "Not your password? Sign up again with yours: a new code replaces this one.",
      }),
    ],
    "Verify and sign in",
    async (values, status) => {
      const answer = await call("POST", "/verify", values);
      if (answer.state !== "active") {
        status.textContent = "Your address is verified: an operator will approve your account.";
        return;
      }
      setCsrfToken(answer.csrf_token);
      history.replaceState(null, "", "/portal/");
      await showAccount();
    },
  );
}

function showForgot() {
  show(
    form(
      "forgot",
      "Forgot your password?",
      [field("email", "E-mail", "email")],
      "Send a code",
      async (values, status) => {
        const answer = await call("POST", "/forgot", values);
        status.textContent = answer.message;
        main.append(resetForm(values.email, ""));
      },
      [el("p", {}, link("#", "Back to sign-in"))],
    ),
  );
}

function resetForm(email, code) {
  return form(
    "reset",
    "Choose a new password",
    [
      field("email", "E-mail", "email", email),
      field("code", "Code from the message", "text", code, { autocomplete: "one-time-code" }),
      field("password", "New password (at least 10 characters)", "password", "", {
        autocomplete: "new-password",
        minlength: "10",
      }),
    ],
    "Set password",
    async (values, status) => {
      await call("POST", "/reset", values);
      status.textContent = "Your password was changed and every access token ended: sign in again.";
      main.append(el("p", {}, link("/portal/", "Sign in")));
    },
  );
}

function keyRow(key, reload) {
  const actions = el("td");
  const labelCell = el("td", { text: key.label });
  if (key.status !== "revoked") actions.append(labelButton(key, labelCell, reload), " ");
  if (key.status === "active") {
    actions.append(
      el("button", {
        type: "button",
        class: "secondary",
        text: "Rotate",
        "data-rotate": String(key.id),
        onclick: async () => {
          try {
            const rotated = await call("POST", `/keys/${key.id}/rotate`, {});
            await reload();
            showNewKey(rotated.api_key, `The old key works until ${rotated.old_key_until}.`);
          } catch (error) {
            toast(error.message);
          }
        },
      }),
      " ",
    );
  }
  if (key.status !== "revoked") {
    actions.append(el("button", {
      type: "button",
      class: "danger",
      text: "Revoke",
      "data-revoke": String(key.id),
      onclick: async () => {
        if (!confirm(`Revoke key ${key.prefix}… and end its tokens?`)) return;
        try {
          await call("DELETE", `/keys/${key.id}`);
          await reload();
        } catch (error) {
          toast(error.message);
        }
      },
    }));
  }
  return el(
    "tr",
    {},
    el("td", {}, el("code", { text: `${key.prefix}…` })),
    labelCell,
    el("td", { text: key.status }),
    el("td", { text: key.created_at.slice(0, 16).replace("T", " ") }),
    actions,
  );
}

function showNewKey(apiKey, note = "") {
  const box = document.getElementById("new-key");
  box.replaceChildren(
    el("p", { text: "Your new API key. Copy it now: it is shown only once and never mailed." }),
    el("code", { id: "new-key-value", class: "secret", text: apiKey }),
    el("p", { text: note }),
  );
  box.hidden = false;
}

async function showAccount() {
  const session = await call("GET", "/session");
  setCsrfToken(session.csrf_token);
  who.textContent = session.email;
  signOutButton.hidden = false;
  const keysBody = el("tbody", { id: "keys" });
  const tokensBody = el("tbody", { id: "tokens" });
  async function reload() {
    const { keys } = await call("GET", "/keys");
    keysBody.replaceChildren(...keys.map((key) => keyRow(key, reload)));
    const { tokens } = await call("GET", "/tokens");
    tokensBody.replaceChildren(...tokens.map((token) => {
      const end = el("td");
      if (token.state === "live") {
        end.append(el("button", {
          type: "button",
          class: "danger",
          text: "Revoke",
          onclick: async () => {
            await call("DELETE", `/tokens/${token.id}`).catch((error) => toast(error.message));
            await reload();
          },
        }));
      }
      return el(
        "tr",
        {},
        el("td", { text: String(token.id) }),
        el("td", { text: String(token.api_key_id) }),
        el("td", { text: token.issued_at.slice(0, 16).replace("T", " ") }),
        el("td", { text: token.state }),
        end,
      );
    }));
  }
  const head = (...names) =>
    el("thead", {}, el("tr", {}, ...names.map((n) => el("th", { text: n }))));
  show(
    el(
      "section",
      { class: "card" },
      el("h1", { text: "Your API keys" }),
      el("div", { id: "new-key", class: "notice", hidden: "" }),
      el("table", {}, head("Key", "Label", "Status", "Created", ""), keysBody),
      form(
        "create-key",
        "New key",
        [field("label", "Label", "text", "", { maxlength: "200" })],
        "Create key",
        async ({ label }) => {
          const created = await call("POST", "/keys", { label });
          await reload();
          showNewKey(created.api_key);
        },
      ),
    ),
    el(
      "section",
      { class: "card" },
      el("h1", { text: "Your access tokens" }),
      el("table", {}, head("Id", "Key", "Issued", "State", ""), tokensBody),
    ),
    form(
      "change-password",
      "Change your password",
      [
        field("current_password", "Current password", "password", "", {
          autocomplete: "current-password",
        }),
        field("password", "New password", "password", "", {
          autocomplete: "new-password",
          minlength: "10",
        }),
      ],
      "Change password",
      async (values, status) => {
        const answer = await call("POST", "/password", values);
        status.textContent = `Password changed; ${answer.tokens_revoked} token(s) ended.`;
      },
    ),
    emailChangeCard(
      location.pathname === "/portal/email" ? params.get("code") ?? "" : null,
      (email) => (who.textContent = email),
    ),
    deleteAccountForm(showDeleted),
  );
  await reload();
  if (location.pathname === "/portal/email") document.getElementById("email-code")?.focus();
}

function showSignedOut() {
  setCsrfToken("");
  who.textContent = "";
  signOutButton.hidden = true;
}

function showDeleted(answer) {
  showSignedOut();
  showSignIn();
  const status = document.getElementById("sign-in-status");
  status.textContent = `Your account was deleted, with ${answer.api_keys_deleted} key(s) and ` +
    `${answer.tokens_deleted} token(s).`;
}

signOutButton.addEventListener("click", async () => {
  await call("POST", "/signout", {}).catch(() => undefined);
  showSignedOut();
  location.hash = "";
  showSignIn();
});

async function route() {
  if (location.pathname === "/portal/verify") {
    show(verifyForm(params.get("email") ?? "", params.get("code") ?? ""));
    return;
  }
  if (location.pathname === "/portal/reset") {
    show(resetForm(params.get("email") ?? "", params.get("code") ?? ""));
    return;
  }
  if (location.hash === "#signup") return showSignUp();
  if (location.hash === "#forgot") return showForgot();
  try {
    await showAccount();
  } catch {
    showSignIn();
  }
}

addEventListener("hashchange", route);
route();
