/**
 * The admin listener against what a second red team tried (issue 26): a
 * `Host` that changes the routed path or breaks the URL, repeated JSON keys,
 * reads and refusals that left no trace, operator names used twice, and
 * early answers to requests with a body.
 */
import assert from "node:assert/strict";
import { startRawServer } from "../_raw_http.ts";
import { createAdminTest } from "./_admin.ts";

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
