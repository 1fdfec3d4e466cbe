/**
 * The admin API through its real handler and a real store: operator sign-in
 * (401, 403, throttling), users, keys, tokens, audit, throttle and stats.
 * Every answer is also checked against the OpenAPI document (see _admin.ts).
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { ADMIN_BASE, createAdminTest } from "../_helpers/admin_api.ts";

Deno.test("[admin] no operator token: 401 with a Bearer challenge, nothing counted", async () => {
  await using t = await createAdminTest();
  const answer = await t.call("GET", "/admin/v1/users", { token: null });
  assert.equal(answer.status, 401);
  assert.equal(answer.body.error.code, "invalid_token");
  assert.match(answer.headers.get("www-authenticate")!, /^Bearer realm="keygate"/);
  assert.deepEqual(await t.store.listLoginFailures(t.clock.now()), []);
  assert.deepEqual(await t.store.searchAudit({ limit: 10, action: "operator.login_failed" }), []);
});

Deno.test("[admin] a wrong token is 401, audited and counted; the 6th wrong one is 429, never the right one", async () => {
  await using t = await createAdminTest();
  const wrong = "kgo_" + "a".repeat(40);
  for (let i = 0; i < 5; i++) {
    const answer = await t.call("GET", "/admin/v1/me", { token: wrong });
    assert.equal(answer.status, 401);
    assert.equal(answer.body.error.message.includes(wrong), false, "never echoes the token");
  }
  const blocked = await t.call("GET", "/admin/v1/me", { token: wrong });
  assert.equal(blocked.status, 429);
  assert.equal(blocked.body.error.code, "too_many_attempts");
  assert.equal(blocked.headers.get("retry-after"), "1");
  // A valid token is verified first: the address's block never locks out an operator.
  assert.equal((await t.call("GET", "/admin/v1/me")).status, 200);
  assert.equal((await t.call("GET", "/admin/v1/me", { token: t.readToken })).status, 200);
  // Another address is not blocked.
  const elsewhere = await t.call("GET", "/admin/v1/me", { token: wrong, client: "192.0.2.99" });
  assert.equal(elsewhere.status, 401);
  const counters = await t.store.listLoginFailures(t.clock.now());
  const counter = counters.find((row) => row.subject === "admin:192.0.2.10")!;
  assert.equal(counter.failures, 5, "a guess while blocked is not counted again");
  const audit = await t.store.searchAudit({ limit: 10, action: "operator.login_failed" });
  assert.equal(audit.length, 6);
  assert.equal(JSON.stringify(audit).includes(wrong), false);
  // The block ends: a wrong token is 401 again.
  t.clock.advance(2000);
  assert.equal((await t.call("GET", "/admin/v1/me", { token: wrong })).status, 401);
});

Deno.test("[admin] POST /admin/v1/throttle/clear forgets admin:ADDRESS counters, audited", async () => {
  await using t = await createAdminTest();
  const wrong = "kgo_" + "c".repeat(40);
  for (let i = 0; i < 5; i++) {
    await t.call("GET", "/admin/v1/me", { token: wrong, client: "127.0.0.1" });
  }
  assert.equal(
    (await t.call("GET", "/admin/v1/me", { token: wrong, client: "127.0.0.1" })).status,
    429,
  );
  const bySubject = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "admin:127.0.0.1" },
  });
  assert.deepEqual(bySubject.body, { cleared: 1 });
  assert.equal(
    (await t.call("GET", "/admin/v1/me", { token: wrong, client: "127.0.0.1" })).status,
    401,
  );
  const byAddress = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "127.0.0.1" },
  });
  assert.deepEqual(byAddress.body, { cleared: 1 });
  assert.deepEqual(await t.store.listLoginFailures(t.clock.now()), []);
  const audit = await t.store.searchAudit({ limit: 2, action: "throttle.cleared" });
  assert.deepEqual(audit.map((entry) => [entry.actor, entry.subject]), [
    ["operator:admin", "address:127.0.0.1"],
    ["operator:admin", "admin:127.0.0.1"],
  ]);
});

Deno.test("[admin] GET /admin/v1/me names the operator; a revoked operator gets 401", async () => {
  await using t = await createAdminTest();
  const me = await t.call("GET", "/admin/v1/me", { token: t.readToken });
  assert.equal(me.status, 200);
  assert.deepEqual(me.body, { name: "viewer", role: "read" });
  const [viewer] = (await t.store.listOperators()).filter((op) => op.name === "viewer");
  await t.store.revokeOperator(viewer.id, { now: t.clock.now(), audit: undefined });
  const answer = await t.call("GET", "/admin/v1/me", { token: t.readToken });
  assert.equal(answer.status, 401);
  const audit = await t.store.searchAudit({ limit: 1, action: "operator.login_failed" });
  assert.equal(audit[0].detail.reason, "revoked");
});

Deno.test("[admin] a read-only operator reads but gets 403 on every change, which stores nothing", async () => {
  await using t = await createAdminTest();
  const userId = await t.addUser("ann@example.org");
  assert.equal((await t.call("GET", "/admin/v1/users", { token: t.readToken })).status, 200);
  const auditBefore = await t.store.countRows("audit_log");
  const writes: [string, string, unknown][] = [
    ["POST", "/admin/v1/users", { email: "bob@example.org", password: "pw" }],
    ["POST", `/admin/v1/users/${userId}/keys`, {}],
    ["POST", `/admin/v1/users/${userId}/disable`, undefined],
    ["POST", `/admin/v1/users/${userId}/tokens/revoke`, {}],
    ["PUT", `/admin/v1/users/${userId}/password`, { password: "new" }],
    ["POST", "/admin/v1/throttle/clear", { target: "192.0.2.1" }],
  ];
  for (const [method, path, body] of writes) {
    const answer = await t.call(method, path, { token: t.readToken, body });
    assert.equal(answer.status, 403, `${method} ${path}`);
    assert.equal(answer.body.error.code, "forbidden");
    assert.equal(answer.body.error.message, 'Operator "viewer" may only read');
  }
  assert.equal(await t.store.countRows("users"), 1);
  assert.equal(await t.store.countRows("api_keys"), 0);
  // Each refusal is audited, and nothing else is written.
  assert.equal(await t.store.countRows("audit_log"), auditBefore + writes.length);
  const refused = await t.store.searchAudit({ limit: 10, action: "operator.forbidden" });
  assert.deepEqual(refused.map((entry) => [entry.actor, entry.detail.route]).reverse(), [
    ["operator:viewer", "POST /admin/v1/users"],
    ["operator:viewer", "POST /admin/v1/users/:id/keys"],
    ["operator:viewer", "POST /admin/v1/users/:id/disable"],
    ["operator:viewer", "POST /admin/v1/users/:id/tokens/revoke"],
    ["operator:viewer", "PUT /admin/v1/users/:id/password"],
    ["operator:viewer", "POST /admin/v1/throttle/clear"],
  ]);
  assert.equal((await t.store.findUserById(userId))!.disabled, false);
});

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
});

Deno.test("[admin] a key is shown once at creation, then only its prefix and last use", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  const created = await t.call("POST", `/admin/v1/users/${id}/keys`, {
    body: { label: "billing", expires_in: "30d" },
  });
  assert.equal(created.status, 201);
  const apiKey: string = created.body.api_key;
  assert.match(apiKey, /^[0-9a-f-]{36}$/);
  assert.equal(created.body.key.prefix, apiKey.slice(0, 8));
  assert.equal(created.body.key.expires_at, "2026-01-31T00:00:00.000Z");
  const stored = await t.store.findApiKeyByHash(hashSecret(apiKey));
  assert.equal(stored?.label, "billing");

  await t.login("ann@example.org", "correct horse", apiKey);
  const list = await t.call("GET", `/admin/v1/users/${id}/keys`);
  assert.equal(list.status, 200);
  assert.equal(JSON.stringify(list.body).includes(apiKey), false, "the key is never shown again");
  assert.deepEqual(
    list.body.keys.map((k: { prefix: string; status: string }) => [k.prefix, k.status]),
    [
      [apiKey.slice(0, 8), "active"],
    ],
  );
  const detail = await t.call("GET", `/admin/v1/keys/${created.body.key.id}`);
  assert.equal(detail.body.label, "billing");
  assert.equal(JSON.stringify(detail.body).includes(apiKey), false);
  const [row] = await t.store.searchAudit({ limit: 1, action: "key.created" });
  assert.equal(row.actor, "operator:admin");
  assert.equal(JSON.stringify(row).includes(apiKey), false);
});

Deno.test("[admin] GET /admin/v1/keys lists every key with its owner; ?unused= finds stale ones", async () => {
  await using t = await createAdminTest();
  const ann = await t.addUser("ann@example.org");
  const bob = await t.addUser("bob@example.org");
  const annKey = (await t.call("POST", `/admin/v1/users/${ann}/keys`, { body: {} })).body;
  t.clock.advance(10 * 86_400_000);
  const bobKey = (await t.call("POST", `/admin/v1/users/${bob}/keys`, { body: {} })).body;
  const all = await t.call("GET", "/admin/v1/keys", { token: t.readToken });
  assert.equal(all.status, 200);
  assert.deepEqual(all.body.keys.map((k: { id: number; email: string }) => [k.id, k.email]), [
    [annKey.key.id, "ann@example.org"],
    [bobKey.key.id, "bob@example.org"],
  ]);
  assert.equal(JSON.stringify(all.body).includes(annKey.api_key), false);
  const stale = await t.call("GET", "/admin/v1/keys?unused=7d", { token: t.readToken });
  assert.deepEqual(stale.body.keys.map((k: { id: number }) => k.id), [annKey.key.id]);
  await t.login("ann@example.org", "correct horse", annKey.api_key); // a login is a use
  await t.store.recordKeyUsage([{
    apiKeyId: annKey.key.id,
    lastUsedAt: t.clock.now(),
    lastUsedFrom: "198.51.100.7",
    count: 1,
  }]);
  const after = await t.call("GET", "/admin/v1/keys?unused=7d", { token: t.readToken });
  assert.deepEqual(after.body.keys, []);
  assert.equal((await t.call("GET", "/admin/v1/keys?unused=soon")).status, 400);
});

Deno.test("[admin] POST /admin/v1/keys/{id}/rotate issues a successor; the old key ends after the grace", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  const created = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label: "app" } });
  const oldKey = created.body.api_key;
  const oldToken = await t.login("ann@example.org", "correct horse", oldKey);
  const rotated = await t.call("POST", `/admin/v1/keys/${created.body.key.id}/rotate`, {
    body: { grace: "1h" },
  });
  assert.equal(rotated.status, 201);
  assert.notEqual(rotated.body.api_key, oldKey);
  assert.equal(rotated.body.key.label, "app");
  assert.equal(rotated.body.old_key.replaced_by, rotated.body.key.id);
  assert.equal(rotated.body.old_key_until, "2026-01-01T01:00:00.000Z");
  assert.equal(await t.secureStatus(oldKey, oldToken), 200, "works during the grace");
  t.clock.advance(3_600_001);
  assert.equal(await t.secureStatus(oldKey, oldToken), 401);
  await t.login("ann@example.org", "correct horse", rotated.body.api_key);
  const again = await t.call("POST", `/admin/v1/keys/${created.body.key.id}/rotate`, { body: {} });
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, "conflict");
  const bad = await t.call("POST", `/admin/v1/keys/${rotated.body.key.id}/rotate`, {
    body: { grace: "x" },
  });
  assert.equal(bad.status, 400);
});

Deno.test("[admin] revoking one token refuses the next secure request with it; others keep working", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  const apiKey = (await t.call("POST", `/admin/v1/users/${id}/keys`, { body: {} })).body.api_key;
  const first = await t.login("ann@example.org", "correct horse", apiKey);
  const second = await t.login("ann@example.org", "correct horse", apiKey);
  const tokens = await t.call("GET", `/admin/v1/users/${id}/tokens`);
  assert.equal(tokens.status, 200);
  assert.equal(tokens.body.tokens.length, 2);
  assert.equal(JSON.stringify(tokens.body).includes(first), false, "never the token");
  const firstId = tokens.body.tokens[1].id; // newest first
  const revoked = await t.call("POST", `/admin/v1/tokens/${firstId}/revoke`);
  assert.deepEqual(revoked.body, { id: firstId, revoked: true });
  assert.equal(await t.secureStatus(apiKey, first), 401);
  assert.equal(await t.secureStatus(apiKey, second), 200);
  assert.deepEqual((await t.call("POST", `/admin/v1/tokens/${firstId}/revoke`)).body, {
    id: firstId,
    revoked: false,
  });
  const live = await t.call("GET", `/admin/v1/users/${id}/tokens?live=true`);
  assert.equal(live.body.tokens.length, 1);
  const [row] = await t.store.searchAudit({ limit: 1, action: "token.revoked" });
  assert.deepEqual([row.actor, row.subject], ["operator:admin", `token:${firstId}`]);

  const all = await t.call("POST", `/admin/v1/users/${id}/tokens/revoke`, { body: {} });
  assert.deepEqual(all.body, { tokens_revoked: 1 });
  assert.equal(await t.secureStatus(apiKey, second), 401);
  const future = await t.call("POST", `/admin/v1/users/${id}/tokens/revoke`, {
    body: { before: "2030-01-01T00:00:00Z" },
  });
  assert.equal(future.status, 400);
});

Deno.test("[admin] revoking and disabling keys end their tokens", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  const created = (await t.call("POST", `/admin/v1/users/${id}/keys`, { body: {} })).body;
  const token = await t.login("ann@example.org", "correct horse", created.api_key);
  const disabled = await t.call("POST", `/admin/v1/keys/${created.key.id}/disable`);
  assert.equal(disabled.body.status, "disabled");
  assert.equal(await t.secureStatus(created.api_key, token), 401);
  const enabled = await t.call("POST", `/admin/v1/keys/${created.key.id}/enable`);
  assert.equal(enabled.body.status, "active");
  assert.equal(await t.secureStatus(created.api_key, token), 200);
  const revoked = await t.call("POST", `/admin/v1/keys/${created.key.id}/revoke`);
  assert.equal(revoked.body.status, "revoked");
  assert.equal(revoked.body.tokens_revoked, 1);
  assert.equal(await t.secureStatus(created.api_key, token), 401);
  assert.equal((await t.call("POST", `/admin/v1/keys/${created.key.id}/enable`)).status, 409);
  assert.equal((await t.call("POST", "/admin/v1/keys/999/revoke")).status, 404);
});

Deno.test("[admin] GET /admin/v1/audit filters by actor, action, subject and time, and pages", async () => {
  await using t = await createAdminTest();
  await t.addUser("a@example.org");
  t.clock.advance(60_000);
  await t.addUser("b@example.org");
  await t.store.appendAudit({
    at: t.clock.now(),
    actor: "cli:root",
    action: "user.added",
    subject: "user:c@x.org",
  });
  const byOperator = await t.call("GET", "/admin/v1/audit?actor=operator:admin&action=user.added");
  assert.equal(byOperator.status, 200);
  assert.deepEqual(byOperator.body.entries.map((e: { subject: string }) => e.subject), [
    "user:b@example.org",
    "user:a@example.org",
  ]);
  const bySubject = await t.call("GET", "/admin/v1/audit?subject=user:a@example.org");
  assert.equal(bySubject.body.entries.length, 1);
  const byTime = await t.call("GET", "/admin/v1/audit?action=user.added&from=2026-01-01T00:00:30Z");
  assert.equal(byTime.body.entries.length, 2);
  const page1 = await t.call("GET", "/admin/v1/audit?limit=2");
  const page2 = await t.call("GET", `/admin/v1/audit?limit=2&cursor=${page1.body.next}`);
  const everything = await t.call("GET", "/admin/v1/audit?limit=200");
  assert.deepEqual(
    [...page1.body.entries, ...page2.body.entries].map((e: { id: number }) => e.id),
    everything.body.entries.slice(0, 4).map((e: { id: number }) => e.id),
  );
  assert.equal((await t.call("GET", "/admin/v1/audit?from=yesterday")).status, 400);
  for (const cursor of ["0", "x!", page1.body.next + "A", btoa('["a",1]')]) {
    const refused = await t.call("GET", `/admin/v1/audit?cursor=${encodeURIComponent(cursor)}`);
    assert.equal(refused.status, 400, cursor);
    assert.equal(refused.body.error.code, "invalid_request");
  }
  // Another list's cursor is refused too: its sort keys are not this list's.
  const users = await t.call("GET", "/admin/v1/users?limit=1");
  assert.equal((await t.call("GET", `/admin/v1/audit?cursor=${users.body.next}`)).status, 400);
});

Deno.test("[admin] every list pages the same way: limit, cursor and next", async () => {
  await using t = await createAdminTest();
  const ids: number[] = [];
  for (const email of ["carol@x.org", "alice@y.org", "bob@x.org"]) {
    const userId = await t.addUser(email);
    ids.push(userId);
    for (let i = 0; i < 2; i++) {
      assert.equal(
        (await t.call("POST", `/admin/v1/users/${userId}/keys`, { body: {} })).status,
        201,
      );
    }
  }
  for (let i = 0; i < 5; i++) {
    await t.store.recordLoginFailures([`client:192.0.2.${i}`], {
      now: t.clock.now(),
      audit: undefined,
      next: () => ({
        subject: `client:192.0.2.${i}`,
        failures: 1,
        lastFailureAt: t.clock.now(),
        blockedUntil: i % 2 === 0 ? t.clock.now() + 60_000 : 0,
        forgetAt: t.clock.now() + 3_600_000,
      }),
    });
  }
  const lists: [string, string][] = [
    ["/admin/v1/users", "users"],
    ["/admin/v1/keys", "keys"],
    [`/admin/v1/users/${ids[0]}/keys`, "keys"],
    [`/admin/v1/users/${ids[0]}/tokens`, "tokens"],
    ["/admin/v1/throttle", "counters"],
    ["/admin/v1/audit", "entries"],
  ];
  for (const [path, field] of lists) {
    const whole = await t.call("GET", `${path}?limit=200`);
    assert.equal(whole.status, 200, path);
    assert.equal(whole.body.next, null, path);
    const paged: unknown[] = [];
    let page = await t.call("GET", `${path}?limit=1`);
    for (let i = 0; i < 50; i++) {
      assert.equal(page.status, 200, path);
      assert.ok(page.body[field].length <= 1, `${path}: limit=1 gives at most one row`);
      paged.push(...page.body[field]);
      if (page.body.next === null) break;
      page = await t.call("GET", `${path}?limit=1&cursor=${page.body.next}`);
    }
    assert.deepEqual(paged, whole.body[field], path);
  }
  // The reproduction: ?limit=1 on the key list gave every key with next: null.
  const one = await t.call("GET", "/admin/v1/keys?limit=1");
  assert.equal(one.body.keys.length, 1);
  assert.equal(one.body.keys[0].email, "alice@y.org");
  assert.notEqual(one.body.next, null);
  const blocked = await t.call("GET", "/admin/v1/throttle?limit=3");
  assert.deepEqual(blocked.body.counters.map((c: { blocked: boolean }) => c.blocked), [
    true,
    true,
    true,
  ]);
  assert.equal((await t.call("GET", "/admin/v1/stats")).body.throttled_subjects, 3);
});

Deno.test("[admin] GET /admin/v1/stats counts rows, live tokens and the metric totals", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  const apiKey = (await t.call("POST", `/admin/v1/users/${id}/keys`, { body: {} })).body.api_key;
  await t.login("ann@example.org", "correct horse", apiKey);
  const stats = await t.call("GET", "/admin/v1/stats", { token: t.readToken });
  assert.equal(stats.status, 200);
  assert.deepEqual(stats.body, {
    at: "2026-01-01T00:00:00.000Z",
    users: 1,
    api_keys: 1,
    live_tokens: 1,
    throttled_subjects: 0,
    counters: {
      tokens_issued: 1,
      login_failures: 0,
      throttled_requests: 0,
      secure_allowed: 0,
      secure_denied: 0,
    },
  });
});

Deno.test("[admin] GET /admin/v1/stats/history returns the samples taken, oldest first", async () => {
  await using t = await createAdminTest();
  const empty = await t.call("GET", "/admin/v1/stats/history", { token: t.readToken });
  assert.equal(empty.status, 200);
  assert.deepEqual(empty.body, { interval_seconds: 60, samples: [] });
  await t.history.sampleNow();
  t.clock.advance(60_000);
  await t.addUser("ann@example.org");
  await t.history.sampleNow();
  const answer = await t.call("GET", "/admin/v1/stats/history", { token: t.readToken });
  assert.deepEqual(
    answer.body.samples.map((s: { at: string; users: number }) => [s.at, s.users]),
    [["2026-01-01T00:00:00.000Z", 0], ["2026-01-01T00:01:00.000Z", 1]],
  );
});

Deno.test("[admin] GET /admin/v1/throttle lists counters and POST .../clear forgets them", async () => {
  await using t = await createAdminTest();
  for (let i = 0; i < 2; i++) {
    await t.call("GET", "/admin/v1/me", { token: "kgo_" + "b".repeat(40) });
  }
  const list = await t.call("GET", "/admin/v1/throttle");
  assert.equal(list.status, 200);
  assert.deepEqual(
    list.body.counters.map((c: { subject: string; failures: number }) => [c.subject, c.failures]),
    [
      ["admin:192.0.2.10", 2],
    ],
  );
  await t.store.recordLoginFailures(["client:203.0.113.5"], {
    now: t.clock.now(),
    next: (_p, subject) => ({
      subject,
      failures: 1,
      lastFailureAt: t.clock.now(),
      blockedUntil: 0,
      forgetAt: t.clock.now() + 60_000,
    }),
    audit: undefined,
  });
  const cleared = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "203.0.113.5" },
  });
  assert.deepEqual(cleared.body, { cleared: 1 });
  assert.equal((await t.store.findLoginFailures(["client:203.0.113.5"], t.clock.now())).length, 0);
  const unknown = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "nobody@x.org" },
  });
  assert.equal(unknown.status, 404);
});

Deno.test("[admin] unknown paths are 404, wrong methods 405 with Allow, after sign-in", async () => {
  await using t = await createAdminTest();
  const missing = await t.admin(
    new Request(`${ADMIN_BASE}/admin/v1/nothing`, {
      headers: { authorization: `Bearer ${t.writeToken}` },
    }),
  );
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).error.code, "not_found");
  const wrong = await t.admin(
    new Request(`${ADMIN_BASE}/admin/v1/users`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${t.writeToken}` },
    }),
  );
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get("allow"), "GET, POST");
  await wrong.body?.cancel();
  const anonymous = await t.admin(new Request(`${ADMIN_BASE}/admin/v1/nothing`));
  assert.equal(anonymous.status, 401, "the route list is not probed without a token");
  await anonymous.body?.cancel();
});

Deno.test("[admin] the console is served with a strict CSP, no cookie and no CORS", async () => {
  await using t = await createAdminTest();
  const page = await t.admin(
    new Request(`${ADMIN_BASE}/`, { headers: { origin: "https://evil.example" } }),
  );
  assert.equal(page.status, 200);
  assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
  const csp = page.headers.get("content-security-policy")!;
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.match(csp, /style-src 'self'(;|$)/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.equal(page.headers.get("x-frame-options"), "DENY");
  assert.equal(page.headers.get("set-cookie"), null);
  assert.equal(page.headers.get("access-control-allow-origin"), null);
  const html = await page.text();
  assert.match(html, /<script type="module" src="\/console\/app.js"><\/script>/);
  assert.equal(
    /<script>|<style|style="|onclick=|https?:\/\//.test(html),
    false,
    "nothing inline or external",
  );
  const script = await t.admin(new Request(`${ADMIN_BASE}/console/app.js`));
  assert.equal(script.headers.get("content-type"), "text/javascript; charset=utf-8");
  assert.match(await script.text(), /sessionStorage|readToken/);
  const notThere = await t.admin(new Request(`${ADMIN_BASE}/console/../../main.ts`));
  assert.equal(notThere.status, 404);
  await notThere.body?.cancel();
  const posted = await t.admin(new Request(`${ADMIN_BASE}/`, { method: "POST" }));
  assert.equal(posted.status, 405);
  await posted.body?.cancel();
});

Deno.test("[admin] control characters: 400 for new labels and e-mails, escaped when stored rows are read", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  for (const label of ["red\x1b[31m", "two\nlines", "c1\x9b2J", "del\x7f"]) {
    const answer = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label } });
    assert.equal(answer.status, 400, JSON.stringify(label));
    assert.equal(answer.body.error.code, "invalid_request");
    assert.match(answer.body.error.message, /^Invalid label: control, invisible and bidirectional/);
  }
  assert.equal(await t.store.countRows("api_keys"), 0);
  const added = await t.call("POST", "/admin/v1/users", {
    body: { email: "x\x9b@example.org", password: "x" },
  });
  assert.equal(added.status, 400);
  assert.equal(added.body.error.code, "invalid_request");
  assert.match(added.body.error.message, /^Invalid e-mail/);
  const renamed = await t.call("PUT", `/admin/v1/users/${id}/email`, {
    body: { email: "ann\x1b@example.org" },
  });
  assert.equal(renamed.status, 400);
  assert.equal((await t.store.findUserById(id))?.email, "ann@example.org");
  assert.equal(await t.store.countRows("users"), 1);

  // Rows stored before such characters were refused come back escaped, with the same value.
  const email = "old\x1b]0;x\x07\x9b@example.org";
  const label = "red\x1b[31m\nfake\x9b2J\x7f";
  const old = await t.store.insertUser(
    { email, passwordHash: "x", tokenTimeoutSeconds: null },
    { now: t.clock.now(), audit: undefined },
  );
  await t.store.insertApiKey({
    userId: old.id,
    keyHash: hashSecret("abcd1111-0000-4000-8000-000000000001"),
    prefix: "abcd1111",
    label,
    expiresAt: null,
    introspect: false,
  }, { now: t.clock.now(), audit: undefined });
  const response = await t.admin(
    new Request(`${ADMIN_BASE}/admin/v1/keys`, {
      headers: { authorization: `Bearer ${t.writeToken}` },
    }),
    { remoteAddr: { hostname: "192.0.2.10" } },
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  const text = await response.text();
  // deno-lint-ignore no-control-regex
  assert.doesNotMatch(text, /[\x00-\x1f\x7f-\x9f]/);
  assert.ok(text.includes(String.raw`red\u001b[31m\nfake\u009b2J\u007f`), text);
  assert.ok(text.includes(String.raw`old\u001b]0;x\u0007\u009b@example.org`), text);
  const [key] = JSON.parse(text).keys;
  assert.deepEqual([key.email, key.label], [email, label]);
});

Deno.test("[admin] invisible and bidirectional characters: 400 in e-mails, labels and targets; stored rows escaped", async () => {
  await using t = await createAdminTest();
  const id = await t.addUser("ann@example.org");
  // The reproductions: both were 201.
  const added = await t.call("POST", "/admin/v1/users", {
    body: { email: "ann\u200b@example.org", password: "a good password" },
  });
  assert.equal(added.status, 400);
  assert.equal(added.body.error.code, "invalid_request");
  assert.match(added.body.error.message, /\(found U\+200B\)$/);
  const labelled = await t.call("POST", `/admin/v1/users/${id}/keys`, {
    body: { label: "billing\u202etxt.exe" },
  });
  assert.equal(labelled.status, 400);
  assert.match(labelled.body.error.message, /\(found U\+202E\)$/);
  // The whole class: zero-width, bidi controls and marks, other format and default-ignorable
  // characters, lone surrogates, separators and look-alike spaces.
  const refused = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u00ad",
    "\u180e",
    "\u3164",
    "\ufe0f",
    "\u{e0041}",
    "\ud800",
    "\u2028",
    "\u00a0",
    "\u2000",
    "\u200a",
    "\u3000",
    "\u202f",
    "\t",
  ];
  for (const c of refused) {
    const key = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label: `a${c}b` } });
    assert.equal(key.status, 400, JSON.stringify(c));
    const user = await t.call("POST", "/admin/v1/users", {
      body: { email: `x${c}y@example.org`, password: "a good password" },
    });
    assert.equal(user.status, 400, JSON.stringify(c));
    const renamed = await t.call("PUT", `/admin/v1/users/${id}/email`, {
      body: { email: `ann${c}@example.org` },
    });
    assert.equal(renamed.status, 400, JSON.stringify(c));
  }
  const cleared = await t.call("POST", "/admin/v1/throttle/clear", {
    body: { target: "192.0.2.1\u202e" },
  });
  assert.equal(cleared.status, 400);
  assert.equal(await t.store.countRows("api_keys"), 0);
  assert.equal(await t.store.countRows("users"), 1);
  // Plain spaces, accents and other scripts stay allowed.
  for (const label of ["billing key", "clé de facturation", "請求キー", "ключ"]) {
    const ok = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label } });
    assert.equal(ok.status, 201, label);
    assert.equal(ok.body.key.label, label);
  }

  // Rows stored before the rule come back escaped, with the same value.
  const email = "ann\u200b@example.org";
  const label = "billing\u202etxt.exe";
  const old = await t.store.insertUser(
    { email, passwordHash: "x", tokenTimeoutSeconds: null },
    {
      now: t.clock.now(),
      audit: { at: t.clock.now(), actor: "cli:x", action: "user.added", subject: `user:${email}` },
    },
  );
  await t.store.insertApiKey({
    userId: old.id,
    keyHash: hashSecret("abcd1111-0000-4000-8000-000000000002"),
    prefix: "abcd1111",
    label,
    expiresAt: null,
    introspect: false,
  }, { now: t.clock.now(), audit: undefined });
  for (const path of ["/admin/v1/keys?limit=200", "/admin/v1/audit", "/admin/v1/users"]) {
    const response = await t.admin(
      new Request(`${ADMIN_BASE}${path}`, {
        headers: { authorization: `Bearer ${t.writeToken}` },
      }),
      { remoteAddr: { hostname: "192.0.2.10" } },
    );
    assert.equal(response.status, 200, path);
    const text = await response.text();
    assert.doesNotMatch(text, /[\u200b\u202e]/, path);
    assert.ok(text.includes(String.raw`ann\u200b@example.org`), path);
    if (path.includes("keys")) {
      assert.ok(text.includes(String.raw`billing\u202etxt.exe`), text);
      assert.ok(JSON.parse(text).keys.some((k: { label: string }) => k.label === label));
    }
  }
});
