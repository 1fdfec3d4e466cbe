/**
 * One user: details, their API keys with last use (create, rotate, revoke) and their
 * tokens (revoke one or all). Write controls only for write operators.
 *
 * @module
 */
import { api, toQuery } from "../api.js";
import { badge, duration, field, h, replace, showSecretOnce, toast, when } from "../dom.js";
import { change, failed, pager, table } from "./shared.js";
import { userSettingsForms } from "./user_settings.js";

export async function renderUser(main, session, id, params = new URLSearchParams()) {
  const [user, { keys, next: nextKeys }, tokens] = await Promise.all([
    api("GET", `/users/${id}`),
    api("GET", `/users/${id}/keys${toQuery({ cursor: params.get("keys"), limit: 50 })}`),
    api("GET", `/users/${id}/tokens${toQuery({ cursor: params.get("tokens"), limit: 50 })}`),
  ]);
  const rerender = () => renderUser(main, session, id, params).catch(failed);
  const w = session.canWrite;

  const userActions = w
    ? h(
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
    )
    : null;

  const keyRows = keys.map((key) =>
    h(
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
      w
        ? h(
          "td",
          { class: "row-actions" },
          key.status === "active" && key.replaced_by === null
            ? h("button", {
              type: "button",
              class: "secondary",
              "aria-label": `Rotate key ${key.id}`,
              onclick: () => rotate(key),
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
        )
        : null,
    )
  );

  function rotate(key) {
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
          "A successor is issued; the old key and its tokens keep working for the grace period.",
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

  const tokenRows = tokens.tokens.map((token) =>
    h(
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
                change(`Revoke token ${token.id}?`, "Revoke token", () =>
                  api("POST", `/tokens/${token.id}/revoke`), () => {
                  toast(`Token ${token.id} revoked`);
                  rerender();
                }),
            }, "Revoke")
            : null,
        )
        : null,
    )
  );

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

function newKeyForm(userId, rerender) {
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
