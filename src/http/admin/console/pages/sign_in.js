/**
 * The sign-in page: an operator token, checked with GET /admin/v1/me.
 *
 * @module
 */
import { api } from "../api.js";
import { field, h, replace, visible } from "../dom.js";

export function renderSignIn(main, onToken) {
  const input = h("input", {
    type: "password",
    name: "token",
    autocomplete: "off",
    required: true,
    spellcheck: "false",
    placeholder: "kgo_…",
  });
  const error = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    { class: "card narrow", "aria-labelledby": "sign-in-title" },
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h(
      "p",
      {},
      "Paste an operator token. Create one on the keygate host with ",
      h("code", {}, "deno task admin operator create NAME --role read|write"),
      " (with the compiled binary: ",
      h("code", {}, "dist/keygate admin operator create …"),
      ").",
    ),
    field(
      "Operator token",
      input,
      "Kept in this tab only (sessionStorage), sent as a Bearer header.",
    ),
    error,
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    try {
      const me = await api("GET", "/me", undefined, input.value.trim());
      onToken(input.value.trim(), me);
    } catch (e) {
      error.textContent = visible(e.message);
      input.focus();
    }
  });
  replace(main, form);
  input.focus();
}
