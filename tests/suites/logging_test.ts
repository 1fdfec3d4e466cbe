import assert from "node:assert/strict";
import { BASE, issueToken, jsonAuthRequest, postToken, secureGet } from "../_helpers/requests.ts";
import { createTestApp } from "../_helpers/test_app.ts";

const CURRENT = "/api/secure/userservice/tokens/current";
const UTC_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

Deno.test("[e2e] one request line and one audit line per security event, with no secrets", async () => {
  using app = await createTestApp();
  const password = "canary-Pa55word-zx81";
  const userId = await app.addUser("log@example.org", password);
  const apiKey = await app.createKey(userId);
  const keyId = (await app.store.listApiKeys())[0].id;
  const wrongPassword = "canary-wrong-Pa55-qq42";

  const token = await issueToken(app.handler, "log@example.org", password, apiKey);
  const failed = await postToken(
    app.handler,
    jsonAuthRequest("log@example.org", wrongPassword, apiKey),
  );
  assert.equal(failed.status, 401);
  await failed.body?.cancel();
  const unknown = await postToken(
    app.handler,
    jsonAuthRequest("nobody@example.org", wrongPassword, apiKey),
  );
  assert.equal(unknown.status, 401);
  await unknown.body?.cancel();
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, token)).status, 200);
  const revoked = await app.handler(
    new Request(`${BASE}${CURRENT}?api_key=${apiKey}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${token}` },
    }),
    { remoteAddr: { hostname: "192.0.2.44" } },
  );
  assert.equal(revoked.status, 204);

  const entries = app.logLines.map((line) => {
    for (const secret of [password, wrongPassword, apiKey, token]) {
      assert.ok(!line.includes(secret), `a secret in ${line}`);
    }
    const entry = JSON.parse(line);
    assert.match(entry.time, UTC_TIME);
    return entry;
  });

  const requests = entries.filter((e) => e.msg === "request");
  assert.equal(requests.length, 5, "one line per request");
  for (const line of requests) {
    assert.deepEqual(Object.keys(line).sort(), [
      "client",
      "duration_ms",
      "key_id",
      "level",
      "method",
      "msg",
      "path",
      "request_id",
      "status",
      "time",
    ]);
    assert.equal(typeof line.duration_ms, "number");
    assert.match(line.request_id, /^[0-9a-f]{8}-[0-9a-z]+$/);
  }
  assert.deepEqual(requests.map((l) => [l.method, l.status, l.key_id]), [
    ["POST", 200, keyId],
    ["POST", 401, null],
    ["POST", 401, null],
    ["GET", 200, keyId],
    ["DELETE", 204, keyId],
  ]);
  assert.equal(requests[3].path, `${CURRENT}?api_key=REDACTED&api_token=REDACTED`);
  assert.equal(requests[4].client, "192.0.2.44");

  const audit = entries.filter((e) => e.event !== undefined);
  assert.deepEqual(audit.map((e) => [e.event, e.reason, e.detail]), [
    ["token_issued", undefined, undefined],
    ["login_failed", "invalid_credentials", "wrong_password"],
    ["login_failed", "invalid_credentials", "unknown_user"],
    ["token_revoked", undefined, undefined],
  ]);
  assert.equal(audit[0].user_id, userId);
  assert.equal(audit[0].request_id, requests[0].request_id);
  assert.equal(audit[1].level, "warn");
  assert.equal(audit[3].key_id, keyId);
  assert.equal(audit[3].client, "192.0.2.44");
});
