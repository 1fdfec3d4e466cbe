/**
 * The console's pages: each renders into `main` and calls the admin API.
 * Write controls are only rendered for operators with role `write` (the
 * API refuses the others with 403 anyway).
 *
 * @module
 */
import { api, toQuery } from "./api.js";
import { lineChart } from "./chart.js";
import {
  badge,
  confirmDialog,
  duration,
  field,
  h,
  replace,
  showSecretOnce,
  toast,
  when,
} from "./dom.js";

/** The audit actions, for the filter's list. */
const AUDIT_ACTIONS = [
  "user.added",
  "user.disabled",
  "user.enabled",
  "user.timeout_changed",
  "user.password_changed",
  "key.created",
  "key.rotated",
  "key.disabled",
  "key.enabled",
  "key.revoked",
  "tokens.revoked",
  "tokens.purged",
  "throttle.cleared",
  "token.issued",
  "login.failed",
  "token.revoked",
  "operator.created",
  "operator.revoked",
  "operator.login_failed",
];

/** Samples of /stats kept while the tab lives, for the dashboard's charts. */
const samples = [];
const MAX_SAMPLES = 180;
const SAMPLE_MS = 5000;

function table(headers, rows, caption) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, headers.map((text) => h("th", { scope: "col" }, text)))),
      h(
        "tbody",
        {},
        rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length }, "None")),
      ),
    ),
  );
}

function failed(error) {
  toast(error.message, "error");
}

/** Runs a change after a confirmation; reports success or the API's message. */
async function change(question, action, run, done) {
  if (question && !(await confirmDialog(question, action))) return;
  try {
    const result = await run();
    if (done) await done(result);
  } catch (error) {
    failed(error);
  }
}

// ---- Sign in ----------------------------------------------------------------------------

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
      h("code", {}, "keygate admin operator create NAME --role read|write"),
      ".",
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
      error.textContent = e.message;
      input.focus();
    }
  });
  replace(main, form);
  input.focus();
}

// ---- Dashboard --------------------------------------------------------------------------

function perMinute(key) {
  const points = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1];
    const b = samples[i];
    const minutes = (b.at - a.at) / 60000;
    if (minutes <= 0) continue;
    const delta = Math.max(0, b.counters[key] - a.counters[key]);
    points.push({ at: b.at, value: delta / minutes });
  }
  return points;
}

export async function renderDashboard(main, session) {
  const cards = h("div", { class: "cards" });
  const charts = h("div", { class: "charts" });
  replace(
    main,
    h("h1", {}, "Dashboard"),
    cards,
    h("h2", {}, "Activity"),
    h(
      "p",
      { class: "hint" },
      `From keygate's metric counters, sampled every ${
        SAMPLE_MS / 1000
      } s while this page is open.`,
    ),
    charts,
  );
  async function sample() {
    const stats = await api("GET", "/stats");
    samples.push({ ...stats, at: Date.parse(stats.at) });
    if (samples.length > MAX_SAMPLES) samples.shift();
    replace(
      cards,
      [
        ["Users", stats.users],
        ["API keys", stats.api_keys],
        ["Live tokens", stats.live_tokens],
        ["Throttled now", stats.throttled_subjects],
      ].map(([label, value]) =>
        h("div", { class: "card stat" }, h("span", {}, label), h("strong", {}, value))
      ),
    );
    replace(
      charts,
      lineChart("Live tokens", samples.map((s) => ({ at: s.at, value: s.live_tokens }))),
      lineChart("Logins per minute", perMinute("tokens_issued"), "/min"),
      lineChart("Failed logins per minute", perMinute("login_failures"), "/min"),
      lineChart(
        "Throttled subjects",
        samples.map((s) => ({ at: s.at, value: s.throttled_subjects })),
      ),
    );
  }
  await sample();
  session.every(SAMPLE_MS, () => sample().catch(failed));
}

// ---- Users ------------------------------------------------------------------------------

export async function renderUsers(main, session, params) {
  const search = h("input", { type: "search", name: "search", value: params.get("search") ?? "" });
  const list = h("div");
  const searchForm = h(
    "form",
    { class: "inline", role: "search" },
    field("Search e-mail", search),
    h("button", { type: "submit" }, "Search"),
  );
  searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/users${toQuery({ search: search.value.trim() })}`;
  });
  replace(main, h("h1", {}, "Users"), searchForm, list, session.canWrite ? newUserForm() : null);

  const after = params.get("after") ?? undefined;
  const page = await api(
    "GET",
    `/users${toQuery({ search: params.get("search"), after, limit: 25 })}`,
  );
  replace(
    list,
    table(
      ["E-mail", "Status", "Token lifetime", "Created"],
      page.users.map((user) =>
        h(
          "tr",
          {},
          h("td", {}, h("a", { href: `#/users/${user.id}` }, user.email)),
          h("td", {}, badge(user.status)),
          h(
            "td",
            {},
            user.token_timeout_seconds === null ? "default" : duration(user.token_timeout_seconds),
          ),
          h("td", {}, when(user.created_at)),
        )
      ),
      "Users by e-mail",
    ),
    h(
      "nav",
      { class: "pager", "aria-label": "Pages" },
      after
        ? h("a", { href: `#/users${toQuery({ search: params.get("search") })}` }, "First page")
        : null,
      page.next
        ? h(
          "a",
          { href: `#/users${toQuery({ search: params.get("search"), after: page.next })}` },
          "Next page",
        )
        : null,
    ),
  );
}

function newUserForm() {
  const email = h("input", { type: "email", name: "email", required: true, autocomplete: "off" });
  const password = h("input", {
    type: "password",
    name: "password",
    required: true,
    autocomplete: "new-password",
  });
  const timeout = h("input", {
    type: "text",
    name: "token_timeout",
    placeholder: "default",
    pattern: "[0-9]+[smhd]",
  });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "new-user-title" },
    h("h2", { id: "new-user-title" }, "Add a user"),
    field("E-mail", email),
    field("Password", password),
    field("Token lifetime", timeout, 'Such as "10h"; empty for the server\'s default.'),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Add user")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    change(null, null, () =>
      api("POST", "/users", {
        email: email.value.trim(),
        password: password.value,
        token_timeout: timeout.value.trim() || null,
      }), (user) => {
      toast(`Added ${user.email}`);
      location.hash = `#/users/${user.id}`;
    });
  });
  return form;
}

// ---- One user: details, keys, tokens ----------------------------------------------------

export async function renderUser(main, session, id) {
  const [user, { keys }, tokens] = await Promise.all([
    api("GET", `/users/${id}`),
    api("GET", `/users/${id}/keys`),
    api("GET", `/users/${id}/tokens${toQuery({ limit: 50 })}`),
  ]);
  const rerender = () => renderUser(main, session, id).catch(failed);
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
    w ? newKeyForm(id, rerender) : null,
    h("h2", {}, "Tokens"),
    table(
      ["Id", "Key", "Issued", "Expires", "State", ...(w ? ["Actions"] : [])],
      tokenRows,
      "Newest 50 tokens (never the tokens themselves)",
    ),
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

// ---- Audit log --------------------------------------------------------------------------

export async function renderAudit(main, _session, params) {
  const actor = h("input", {
    type: "text",
    name: "actor",
    value: params.get("actor") ?? "",
    placeholder: "operator:ann",
  });
  const action = h(
    "select",
    { name: "action" },
    h("option", { value: "" }, "Any"),
    AUDIT_ACTIONS.map((a) => h("option", { value: a, selected: params.get("action") === a }, a)),
  );
  const subject = h("input", {
    type: "text",
    name: "subject",
    value: params.get("subject") ?? "",
    placeholder: "user:a@example.org",
  });
  const from = h("input", {
    type: "datetime-local",
    name: "from",
    value: params.get("from") ?? "",
  });
  const to = h("input", { type: "datetime-local", name: "to", value: params.get("to") ?? "" });
  const filters = h(
    "form",
    { class: "card filters", role: "search", "aria-label": "Audit filters" },
    field("Actor", actor),
    field("Action", action),
    field("Subject", subject),
    field("From", from),
    field("To", to),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, "Filter"),
      h("a", { href: "#/audit", class: "button secondary" }, "Clear"),
    ),
  );
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/audit${
      toQuery({
        actor: actor.value.trim(),
        action: action.value,
        subject: subject.value.trim(),
        from: from.value,
        to: to.value,
      })
    }`;
  });
  const results = h("div");
  replace(main, h("h1", {}, "Audit log"), filters, results);

  const toInstant = (local) => local ? new Date(local).toISOString() : undefined;
  const query = {
    actor: params.get("actor"),
    action: params.get("action"),
    subject: params.get("subject"),
    from: toInstant(params.get("from")),
    to: toInstant(params.get("to")),
  };
  const page = await api(
    "GET",
    `/audit${toQuery({ ...query, before: params.get("before"), limit: 25 })}`,
  );
  const keep = Object.fromEntries([...params].filter(([name]) => name !== "before"));
  replace(
    results,
    table(
      ["Time", "Actor", "Action", "Subject", "Detail"],
      page.entries.map((entry) =>
        h(
          "tr",
          {},
          h("td", {}, when(entry.at)),
          h("td", {}, h("a", { href: `#/audit${toQuery({ actor: entry.actor })}` }, entry.actor)),
          h("td", {}, h("code", {}, entry.action)),
          h(
            "td",
            {},
            h("a", { href: `#/audit${toQuery({ subject: entry.subject })}` }, entry.subject),
          ),
          h(
            "td",
            { class: "detail" },
            Object.entries(entry.detail).map(([k, v]) => h("span", {}, `${k}=${v ?? "null"}`)),
          ),
        )
      ),
      "Newest first",
    ),
    h(
      "nav",
      { class: "pager", "aria-label": "Pages" },
      params.get("before") ? h("a", { href: `#/audit${toQuery(keep)}` }, "Newest") : null,
      page.next
        ? h("a", { href: `#/audit${toQuery({ ...keep, before: page.next })}` }, "Older")
        : null,
    ),
  );
}

// ---- Throttle ---------------------------------------------------------------------------

export async function renderThrottle(main, session) {
  const { counters } = await api("GET", "/throttle");
  const rerender = () => renderThrottle(main, session).catch(failed);
  const target = h("input", { type: "text", name: "target", required: true });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "clear-title" },
    h("h2", { id: "clear-title" }, "Clear counters"),
    field(
      "E-mail or client address",
      target,
      "A user's e-mail clears the counters of all their keys.",
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Clear")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    change(
      `Forget the failed-login counters of ${target.value}?`,
      "Clear",
      () => api("POST", "/throttle/clear", { target: target.value.trim() }),
      (r) => {
        toast(`${r.cleared} counter(s) cleared`);
        rerender();
      },
    );
  });
  replace(
    main,
    h("h1", {}, "Login throttle"),
    table(
      ["Subject", "User", "Failures", "Blocked until", "Last failure"],
      counters.map((c) =>
        h(
          "tr",
          {},
          h("td", {}, c.subject),
          h("td", {}, c.email ?? "—"),
          h("td", {}, c.failures),
          h("td", {}, c.blocked ? when(c.blocked_until) : "not blocked"),
          h("td", {}, when(c.last_failure_at)),
        )
      ),
      "Live failed-login counters",
    ),
    session.canWrite ? form : null,
  );
}
