/**
 * The admin API through its real handler and a real store: operator sign-in
 * (401, 403, throttling) and read-only operators.
 * Every answer is also checked against the OpenAPI document (see tests/_helpers/admin_api.ts).
 */
import assert from "node:assert/strict";
import { createAdminTest } from "../_helpers/admin_api.ts";

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
