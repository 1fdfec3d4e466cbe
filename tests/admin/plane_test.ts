/**
 * The admin listener against what a second red team tried (issue 26): a
 * `Host` that changes the routed path or breaks the URL, repeated JSON keys,
 * reads and refusals that left no trace, operator names used twice, and
 * early answers to requests with a body.
 */
import assert from "node:assert/strict";
import { createOperator, revokeOperator } from "../../src/auth/operators.ts";
import { startRawServer } from "../_helpers/raw_http.ts";
import { createAdminTest } from "../_helpers/admin_api.ts";

Deno.test("[admin] a malformed Host is 400 invalid_host before routing, never a 500 or a file", async () => {
  await using t = await createAdminTest();
  await using server = await startRawServer(t.admin);
  const auth = `Authorization: Bearer ${t.writeToken}`;
  const hosts = ["127.0.0.1/console/app.js?", "127.0.0.1:99999", "a b", "a@b", "1.2.3.256", "[::1"];
  for (const host of hosts) {
    const response = await server.send(`GET /admin/v1/users HTTP/1.1\r\nHost: ${host}\r\n${auth}`);
    assert.equal(response.status, 400, host);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8", host);
    assert.deepEqual(JSON.parse(response.body), {
      error: {
        code: "invalid_host",
        message: "Invalid Host header: expected a host name and port",
      },
    }, host);
    assert.ok(response.headers.get("content-security-policy"), host);
  }
  const lines = t.logLines.map((line) => JSON.parse(line));
  assert.deepEqual(lines.filter((line) => line.level === "error"), []);
  // A well-formed Host routes on the path as sent.
  const ok = await server.send(`GET /admin/v1/users HTTP/1.1\r\nHost: 127.0.0.1:9444\r\n${auth}`);
  assert.equal(ok.status, 200);
  assert.deepEqual(JSON.parse(ok.body).users, []);
  const asset = await server.send(`GET /console/app.js HTTP/1.1\r\nHost: localhost`);
  assert.equal(asset.status, 200);
});

Deno.test("[admin] a JSON body that repeats a key is 400 invalid_request, however the key is spelled", async () => {
  await using t = await createAdminTest();
  const userId = await t.addUser("ann@example.org");
  const bodies = [
    '{"label":"first","label":"second"}',
    '{"label":"first","l\\u0061bel":"second"}',
  ];
  for (const raw of bodies) {
    const answer = await t.call("POST", `/admin/v1/users/${userId}/keys`, {
      raw,
      headers: { "content-type": "application/json" },
    });
    assert.equal(answer.status, 400, raw);
    assert.deepEqual(answer.body, {
      error: {
        code: "invalid_request",
        message: 'Cannot parse request body: duplicate key "label"',
      },
    });
  }
  const surrogate = await t.call("POST", `/admin/v1/users/${userId}/keys`, {
    raw: '{"label":"\\ud800"}',
    headers: { "content-type": "application/json" },
  });
  assert.equal(surrogate.status, 400);
  assert.equal(await t.store.countRows("api_keys"), 0);
  const added = await t.call("POST", "/admin/v1/users", {
    raw: '{"email":"bob@example.org","password":"pw one","email":"eve@example.org"}',
    headers: { "content-type": "application/json" },
  });
  assert.equal(added.status, 400);
  assert.equal(await t.store.countRows("users"), 1);
});

Deno.test("[admin] every request is one info line naming the operator; bulk reads are audited", async () => {
  await using t = await createAdminTest();
  const userId = await t.addUser("ann@example.org");
  t.logLines.length = 0;
  assert.equal(
    (await t.call("GET", "/admin/v1/users?limit=1", { token: t.readToken })).status,
    200,
  );
  assert.equal((await t.call("GET", "/admin/v1/me", { token: null })).status, 401);
  const forbidden = await t.call("POST", `/admin/v1/users/${userId}/disable`, {
    token: t.readToken,
  });
  assert.equal(forbidden.status, 403);
  const lines = t.logLines.map((line) => JSON.parse(line))
    .filter((line) => line.event === "admin_request");
  const [viewer] = (await t.store.listOperators()).filter((op) => op.name === "viewer");
  assert.deepEqual(
    lines.map((
      line,
    ) => [line.level, line.operator, line.operator_id, line.method, line.path, line.status]),
    [
      ["info", "viewer", viewer.id, "GET", "/admin/v1/users?limit=1", 200],
      ["info", null, null, "GET", "/admin/v1/me", 401],
      ["info", "viewer", viewer.id, "POST", `/admin/v1/users/${userId}/disable`, 403],
    ],
  );
  assert.equal(lines[0].client, "192.0.2.10");
  const text = t.logLines.join("\n");
  assert.equal(text.includes(t.readToken), false, "never a token");
  assert.equal(text.includes(t.readToken.slice(4)), false, "not even its random part");

  // One audit entry per 20 data reads in an hour, not one per page; /me and /stats do not count.
  const bulk = () => t.store.searchAudit({ limit: 10, action: "operator.bulk_read" });
  for (let i = 0; i < 30; i++) await t.call("GET", "/admin/v1/me", { token: t.readToken });
  for (let i = 1; i < 19; i++) {
    await t.call("GET", i % 2 ? "/admin/v1/keys" : "/admin/v1/users", { token: t.readToken });
  }
  assert.deepEqual(await bulk(), []);
  await t.call("GET", `/admin/v1/users/${userId}/tokens`, { token: t.readToken });
  const [entry] = await bulk();
  assert.equal(entry.actor, "operator:viewer");
  assert.equal(entry.subject, "operator:viewer");
  assert.deepEqual(entry.detail, {
    reads: 20,
    since: new Date(t.clock.now()).toISOString(),
    route: "GET /admin/v1/users/:id/tokens",
  });
  for (let i = 0; i < 19; i++) await t.call("GET", "/admin/v1/audit", { token: t.readToken });
  assert.equal((await bulk()).length, 1);
  await t.call("GET", "/admin/v1/audit", { token: t.readToken });
  assert.equal((await bulk()).length, 2);
  // The writer's reads count separately.
  await t.call("GET", "/admin/v1/users");
  assert.equal((await bulk()).length, 2);
});

Deno.test("[admin] a revoked operator's name is never given to another operator", async () => {
  await using t = await createAdminTest();
  const cli = { store: t.store, clock: t.clock, actor: "cli:test" };
  await revokeOperator(cli, "viewer");
  await assert.rejects(createOperator(cli, "viewer", "write"), {
    code: "conflict",
    message: 'Operator "viewer" was revoked: a name is never used again (the audit log names ' +
      "operators by it), choose another",
  });
  await assert.rejects(createOperator(cli, "Admin", "read"), {
    code: "conflict",
    message: 'Operator "admin" already exists',
  });
  assert.equal((await t.store.listOperators()).length, 2);
  assert.equal((await createOperator(cli, "viewer2", "read")).operator.name, "viewer2");
});
