/**
 * One user: details, their API keys with last use (create, rotate, revoke) and their
 * tokens (revoke one or all). Write controls only for write operators.
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { badge, duration, h, replace, toast, when } from "../dom.js";
import { change, failed, pager, table } from "./shared.js";
import { keyRow, newKeyForm } from "./user_keys.js";
import { userSettingsForms } from "./user_settings.js";

export async function renderUser(main, session, id, params = new URLSearchParams()) {
  const [user, { keys, next: nextKeys }, tokens] = await Promise.all([
    api("GET", `/users/${id}`),
    api("GET", `/users/${id}/keys${toQuery({ cursor: params.get("keys"), limit: 50 })}`),
    api("GET", `/users/${id}/tokens${toQuery({ cursor: params.get("tokens"), limit: 50 })}`),
  ]);
  const rerender = () => renderUser(main, session, id, params).catch(failed);
  const w = session.canWrite;

  const userActions = w ? renderUserActions(user, id, rerender) : null;
  const keyRows = keys.map((key) => keyRow(key, { canWrite: w, rerender }));
  const tokenRows = tokens.tokens.map((token) => tokenRow(token, w, rerender));

  replace(
    main,
    h("p", {}, h("a", { href: "#/users" }, "← Users")),
    h("h1", {}, user.email),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Status"),
      h("dd", {}, badge(user.status)),
      h("dt", {}, "Token lifetime"),
      h(
        "dd",
        {},
        duration(user.effective_token_timeout_seconds),
        user.token_timeout_seconds === null ? " (default)" : "",
      ),
      h("dt", {}, "Created"),
      h("dd", {}, when(user.created_at)),
      h("dt", {}, "Tokens valid from"),
      h("dd", {}, when(user.tokens_valid_from)),
    ),
    userActions,
    h("h2", {}, "API keys"),
    table(
      ["Id", "Key", "Label", "Status", "Last used", "Uses", "Expires", ...(w ? ["Actions"] : [])],
      keyRows,
      "API keys, with last use",
    ),
    pager(`/users/${id}`, params, nextKeys, "keys"),
    w ? newKeyForm(id, rerender) : null,
    h("h2", {}, "Tokens"),
    table(
      ["Id", "Key", "Issued", "Expires", "State", ...(w ? ["Actions"] : [])],
      tokenRows,
      "Tokens, newest first, 50 a page (never the tokens themselves)",
    ),
    pager(`/users/${id}`, params, tokens.next, "tokens"),
    w ? userSettingsForms(user, rerender) : null,
  );
}

/** Disable or enable, delete, revoke every token: write operators only. */
function renderUserActions(user, id, rerender) {
  return h(
    "div",
    { class: "actions" },
    user.status === "enabled"
      ? h("button", {
        type: "button",
        class: "danger",
        onclick: () =>
          change(
            `Disable ${user.email}? Their tokens stop working.`,
            "Disable",
            () => api("POST", `/users/${id}/disable`),
            (r) => {
              toast(`Disabled; ${r.tokens_revoked} token(s) ended`);
              rerender();
            },
          ),
      }, "Disable user")
      : h("button", {
        type: "button",
        onclick: () =>
          change(null, null, () => api("POST", `/users/${id}/enable`), () => {
            toast("Enabled");
            rerender();
          }),
      }, "Enable user"),
    h("button", {
      type: "button",
      class: "danger",
      onclick: () =>
        change(
          `Delete ${user.email} with their API keys and tokens? This cannot be undone; the audit log keeps their history.`,
          "Delete user",
          () => api("DELETE", `/users/${id}`),
          (r) => {
            toast(
              `Deleted ${user.email}, ${r.api_keys_deleted} key(s), ${r.tokens_deleted} token(s)`,
            );
            location.hash = "#/users";
          },
        ),
    }, "Delete user"),
    h("button", {
      type: "button",
      class: "danger",
      id: "revoke-all-tokens",
      onclick: () =>
        change(
          `End every token of ${user.email} issued until now?`,
          "Revoke all tokens",
          () => api("POST", `/users/${id}/tokens/revoke`, {}),
          (r) => {
            toast(`${r.tokens_revoked} token(s) revoked`);
            rerender();
          },
        ),
    }, "Revoke all tokens"),
  );
}

/** One token's row: its facts and, for write operators and a live token, revoke. */
function tokenRow(token, w, rerender) {
  return h(
    "tr",
    { "data-token-id": token.id },
    h("td", {}, token.id),
    h("td", {}, token.api_key_id),
    h("td", {}, when(token.issued_at)),
    h("td", {}, when(token.expires_at)),
    h("td", {}, badge(token.live ? "live" : token.revoked_at ? "revoked" : "ended")),
    w
      ? h(
        "td",
        { class: "row-actions" },
        token.live
          ? h("button", {
            type: "button",
            class: "danger",
            "aria-label": `Revoke token ${token.id}`,
            onclick: () =>
              change(
                `Revoke token ${token.id}?`,
                "Revoke token",
                () => api("POST", `/tokens/${token.id}/revoke`),
                () => {
                  toast(`Token ${token.id} revoked`);
                  rerender();
                },
              ),
          }, "Revoke")
          : null,
      )
      : null,
  );
}
