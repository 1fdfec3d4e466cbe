/**
 * A user's settings on their page (write operators): the token lifetime, and
 * a new password (which ends every token of the user, after a confirmation).
 *
 * @module
 */
import { api } from "../api.js";
import { duration, field, h, toast } from "../dom.js";
import { change } from "./shared.js";

/** The two settings forms of `user`; `rerender` redraws the page after a change. */
export function userSettingsForms(user, rerender) {
  const timeout = h("input", {
    type: "text",
    name: "token_timeout",
    value: user.token_timeout_seconds === null ? "" : duration(user.token_timeout_seconds),
    placeholder: "default",
    pattern: "[0-9]+[smhd]",
  });
  const timeoutForm = h(
    "form",
    { class: "card", "aria-labelledby": "timeout-title" },
    h("h2", { id: "timeout-title" }, "Token lifetime"),
    field("Lifetime of new tokens", timeout, 'Such as "2h"; empty for the server\'s default.'),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Save lifetime")),
  );
  timeoutForm.addEventListener("submit", (event) => {
    event.preventDefault();
    change(
      null,
      null,
      () =>
        api("PUT", `/users/${user.id}/token-timeout`, {
          token_timeout: timeout.value.trim() || null,
        }),
      (r) => {
        toast(`Token lifetime is now ${duration(r.effective_token_timeout_seconds)}`);
        rerender();
      },
    );
  });

  const password = h("input", {
    type: "password",
    name: "password",
    required: true,
    autocomplete: "new-password",
  });
  const passwordForm = h(
    "form",
    { class: "card", "aria-labelledby": "password-title" },
    h("h2", { id: "password-title" }, "Password"),
    field("New password", password, "Every token of the user stops working."),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Set password")),
  );
  passwordForm.addEventListener("submit", (event) => {
    event.preventDefault();
    change(
      `Set a new password for ${user.email}? Their tokens stop working.`,
      "Set password",
      () => api("PUT", `/users/${user.id}/password`, { password: password.value }),
      (r) => {
        toast(`Password set; ${r.tokens_revoked} token(s) ended`);
        rerender();
      },
    );
  });
  return h("div", { class: "settings" }, timeoutForm, passwordForm);
}
