/**
 * The admin API through its real handler and a real store: adding, finding,
 * changing and removing users.
 * Every answer is also checked against the OpenAPI document (see tests/_helpers/admin_api.ts).
 */
import assert from "node:assert/strict";
import { createAdminTest } from "../_helpers/admin_api.ts";

Deno.test("[admin] POST /admin/v1/users adds a user with an argon2id hash, audited as the operator", async () => {
  await using t = await createAdminTest();
  const answer = await t.call("POST", "/admin/v1/users", {
    body: { email: "Ann@Example.org", password: "correct horse", token_timeout: "2h" },
  });
  assert.equal(answer.status, 201);
  assert.deepEqual(answer.body, {
    id: answer.body.id,
    email: "ann@example.org",
    status: "enabled",
    token_timeout_seconds: 7200,
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    tokens_valid_from: null,
    effective_token_timeout_seconds: 7200,
  });
  const stored = await t.store.findUserByEmail("ann@example.org");
  assert.match(stored!.passwordHash, /^\$argon2id\$/);
  assert.equal(JSON.stringify(answer.body).includes("argon2"), false);
  const [row] = await t.store.searchAudit({ limit: 1 });
  assert.deepEqual(
    { actor: row.actor, action: row.action, subject: row.subject },
    { actor: "operator:admin", action: "user.added", subject: "user:ann@example.org" },
  );
  assert.ok(t.logLines.some((line) => line.includes('"event":"admin_change"')));
  assert.equal(t.logLines.some((line) => line.includes("correct horse")), false);
});

Deno.test("[admin] POST /admin/v1/users refuses bad input with 4xx in the API's format", async () => {
  await using t = await createAdminTest();
  await t.addUser("ann@example.org");
  const cases: [unknown, number, string, RegExp][] = [
    [{ email: "ann@example.org", password: "x" }, 409, "conflict", /already exists/],
    [{ email: "no-at-sign", password: "x" }, 400, "invalid_request", /Invalid e-mail/],
    [{ email: "b@example.org" }, 400, "invalid_request", /Missing "password"/],
    [{ email: "b@example.org", password: "" }, 400, "invalid_request", /password/],
    [
      { email: "b@example.org", password: "x", admin: true },
      400,
      "invalid_request",
      /Unknown field "admin"/,
    ],
    [{ email: 42, password: "x" }, 400, "invalid_request", /expected a string/],
    [
      { email: "b@example.org", password: "x", token_timeout: "soon" },
      400,
      "invalid_request",
      /token_timeout/,
    ],
    [[1, 2], 400, "invalid_request", /expected a JSON object/],
  ];
  for (const [body, status, code, message] of cases) {
    const answer = await t.call("POST", "/admin/v1/users", { body });
    assert.equal(answer.status, status, JSON.stringify(body));
    assert.equal(answer.body.error.code, code);
    assert.match(answer.body.error.message, message);
  }
  const notJson = await t.call("POST", "/admin/v1/users", {
    raw: "email=a",
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  assert.equal(notJson.status, 415);
  const broken = await t.call("POST", "/admin/v1/users", {
    raw: "{",
    headers: { "content-type": "application/json" },
  });
  assert.equal(broken.status, 400);
  const huge = await t.call("POST", "/admin/v1/users", {
    raw: JSON.stringify({ email: "a@b.org", password: "x".repeat(20_000) }),
    headers: { "content-type": "application/json" },
  });
  assert.equal(huge.status, 413);
  assert.equal(await t.store.countRows("users"), 1);
});

Deno.test("[admin] GET /admin/v1/users searches and pages by e-mail", async () => {
  await using t = await createAdminTest();
  for (const email of ["carol@x.org", "alice@y.org", "bob@x.org"]) await t.addUser(email);
  const page1 = await t.call("GET", "/admin/v1/users?limit=2");
  assert.equal(page1.status, 200);
  assert.deepEqual(page1.body.users.map((u: { email: string }) => u.email), [
    "alice@y.org",
    "bob@x.org",
  ]);
  assert.equal(typeof page1.body.next, "string");
  const page2 = await t.call("GET", `/admin/v1/users?limit=2&cursor=${page1.body.next}`);
  assert.deepEqual(page2.body.users.map((u: { email: string }) => u.email), ["carol@x.org"]);
  assert.equal(page2.body.next, null);
  const found = await t.call("GET", "/admin/v1/users?search=X.ORG");
  assert.deepEqual(found.body.users.map((u: { email: string }) => u.email), [
    "bob@x.org",
    "carol@x.org",
  ]);
  assert.equal((await t.call("GET", "/admin/v1/users?limit=0")).status, 400);
  assert.equal((await t.call("GET", "/admin/v1/users?limit=abc")).status, 400);
});

Deno.test("[admin] user details, timeout, password, disable and enable call the domain and end tokens", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org", "old password");
  const created = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label: "app" } });
  const apiKey = created.body.api_key;
  const token = await t.login("ann@example.org", "old password", apiKey);

  const timeout = await t.call("PUT", `/admin/v1/users/${id}/token-timeout`, {
    body: { token_timeout: "15m" },
  });
  assert.equal(timeout.status, 200);
  assert.equal(timeout.body.token_timeout_seconds, 900);
  assert.equal((await t.store.findUserById(id))!.tokenTimeoutSeconds, 900);
  const reset = await t.call("PUT", `/admin/v1/users/${id}/token-timeout`, {
    body: { token_timeout: null },
  });
  assert.equal(reset.body.effective_token_timeout_seconds, 36000);

  const disabled = await t.call("POST", `/admin/v1/users/${id}/disable`);
  assert.equal(disabled.status, 200);
  assert.equal(disabled.body.status, "disabled");
  assert.equal(disabled.body.tokens_revoked, 1);
  assert.equal(await t.secureStatus(apiKey, token), 401);
  const enabled = await t.call("POST", `/admin/v1/users/${id}/enable`);
  assert.equal(enabled.body.status, "enabled");
  assert.equal(await t.secureStatus(apiKey, token), 401, "ended tokens stay ended");

  const password = await t.call("PUT", `/admin/v1/users/${id}/password`, {
    body: { password: "new one" },
  });
  assert.deepEqual(password.body, { tokens_revoked: 0 });
  await t.login("ann@example.org", "new one", apiKey);

  const missing = await t.call("GET", "/admin/v1/users/999");
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, "not_found");
  assert.equal((await t.call("GET", "/admin/v1/users/abc")).status, 404);
  const actions = (await t.store.searchAudit({ limit: 20, actor: "operator:admin" })).map((r) =>
    r.action
  );
  assert.deepEqual(actions.slice(0, 5), [
    "user.password_changed",
    "user.enabled",
    "user.disabled",
    "user.timeout_changed",
    "user.timeout_changed",
  ]);
});

Deno.test("[admin] PUT .../email renames a user and DELETE removes them with their keys and tokens", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  const apiKey = (await t.call("POST", `/admin/v1/users/${id}/keys`, { body: {} })).body.api_key;
  const token = await t.login("ann@example.org", "correct horse", apiKey);
  const renamed = await t.call("PUT", `/admin/v1/users/${id}/email`, {
    body: { email: "Ann.Smith@example.org" },
  });
  assert.equal(renamed.status, 200);
  assert.equal(renamed.body.email, "ann.smith@example.org");
  assert.equal(await t.secureStatus(apiKey, token), 200, "keys and tokens stay");
  await t.addUser("bob@example.org");
  const taken = await t.call("PUT", `/admin/v1/users/${id}/email`, {
    body: { email: "bob@example.org" },
  });
  assert.equal(taken.status, 409);
  const forbidden = await t.call("DELETE", `/admin/v1/users/${id}`, { token: t.readToken });
  assert.equal(forbidden.status, 403);
  const deleted = await t.call("DELETE", `/admin/v1/users/${id}`);
  assert.equal(deleted.status, 200);
  assert.deepEqual(deleted.body, { api_keys_deleted: 1, tokens_deleted: 1 });
  assert.equal(await t.store.findUserById(id), undefined);
  assert.equal(await t.secureStatus(apiKey, token), 401);
  assert.equal((await t.call("DELETE", `/admin/v1/users/${id}`)).status, 404);
  const actions = (await t.store.searchAudit({ limit: 3, actor: "operator:admin" })).map((r) =>
    r.action
  );
  assert.deepEqual(actions, ["user.deleted", "user.added", "user.renamed"]);
  // The audit log keeps the user's history under an opaque id, never its e-mail.
  const [gone] = await t.store.searchAudit({ limit: 1, actor: "operator:admin" });
  assert.match(gone.subject, /^user:deleted:[A-Za-z0-9_-]{16}$/);
  assert.deepEqual(gone.detail, {
    user_id: id,
    api_keys_deleted: 1,
    tokens_deleted: 1,
    audit_rows_anonymized: 3,
  });
  assert.deepEqual(
    (await t.store.listAudit()).filter((row) => /ann\.smith|ann@/i.test(JSON.stringify(row))),
    [],
  );
});
