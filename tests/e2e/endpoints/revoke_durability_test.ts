/**
 * The revocation endpoint on a SQLite store with the server's durability ("grants"): the
 * answer waits for the WAL sync after its commit (a repeat, which changes nothing, too), and a
 * failed sync is a 503 in the caller's format, after which every write is a 503 and /readyz
 * degrades until a restart. SQLite-only (the sync is SQLite's own
 * mechanism), whatever `KEYGATE_TEST_STORE` names.
 *
 * @module
 */
import assert from "node:assert/strict";
import { assertError, BASE, issueToken, secureGet } from "../../_helpers/requests.ts";
import { createHeldWalSync, hasSettled } from "../../_helpers/held_wal_sync.ts";
import { openTempStore } from "../../_helpers/store.ts";
import { createTestApp } from "../../_helpers/test_app.ts";

const REVOKE = `${BASE}/api/userservice/tokens/revoke`;
const CURRENT = "/api/secure/userservice/tokens/current";

async function setup() {
  const held = createHeldWalSync();
  const app = await createTestApp({
    openStore: () =>
      Promise.resolve(openTempStore({ durability: "grants", runWalSync: held.runWalSync })),
  });
  const userId = await app.addUser("alice@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  const revoke = () =>
    app.handler(
      new Request(REVOKE, {
        method: "POST",
        body: JSON.stringify({ token }),
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          "x-api-key": apiKey,
        },
      }),
    );
  return { app, held, apiKey, token, revoke };
}

Deno.test("[e2e] POST /api/userservice/tokens/revoke answers only after the revocation's WAL sync", async () => {
  const { app, held, apiKey, token, revoke } = await setup();
  using _ = app;
  const syncsBefore = held.syncs.length;
  const answer = revoke();
  await held.waitForSyncs(syncsBefore + 1);
  assert.equal(await hasSettled(answer), false, "no answer before the commit is on disk");
  // Committed already: this worker refuses the token while the sync runs (stricter, not laxer).
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
  await held.syncs[syncsBefore].release();
  const response = await answer;
  assert.equal(response.status, 200);
  assert.equal(await response.text(), "");
  const rows = await app.querySql("SELECT revoked_at FROM tokens");
  assert.deepEqual(rows.map((row) => row.revoked_at), [app.clock.now()]);
});

Deno.test("[e2e] POST /api/userservice/tokens/revoke repeated during the first one's WAL sync answers only after a later sync", async () => {
  const { app, held, apiKey, token, revoke } = await setup();
  using _ = app;
  const syncsBefore = held.syncs.length;
  const first = revoke();
  await held.waitForSyncs(syncsBefore + 1);
  // A client retrying after a timeout: the token is revoked already, no row changes.
  const retry = revoke();
  assert.equal(await hasSettled(retry), false, "not answered while the revocation may be lost");
  await held.syncs[syncsBefore].release();
  assert.equal((await first).status, 200);
  await held.waitForSyncs(syncsBefore + 2);
  assert.equal(await hasSettled(retry), false, "the first sync may have started before it");
  await held.syncs[syncsBefore + 1].release();
  const retried = await retry;
  assert.equal(retried.status, 200);
  assert.equal(await retried.text(), "");
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
  const rows = await app.querySql("SELECT revoked_at FROM tokens");
  assert.deepEqual(rows.map((row) => row.revoked_at), [app.clock.now()]);
});

Deno.test("[e2e] POST /api/userservice/tokens/revoke answers 503 when the WAL sync fails, and so does every later write; /readyz degrades", async () => {
  const { app, held, apiKey, token, revoke } = await setup();
  using _ = app;
  const ready = await app.handler(new Request(`${BASE}/readyz`));
  assert.equal(ready.status, 200);
  assert.deepEqual(await ready.json(), { status: "ready" });
  const syncsBefore = held.syncs.length;
  const answer = revoke();
  await held.waitForSyncs(syncsBefore + 1);
  held.syncs[syncsBefore].fail(new Error("Input/output error (os error 5)"));
  const response = await answer;
  assert.equal(response.headers.get("retry-after"), "1");
  const message = await assertError(response, 503, "service_unavailable", "json");
  assert.doesNotMatch(message, /os error|write-ahead/, "the disk's error stays in the log");
  // The retry is refused too: a later sync would prove nothing about the lost commit.
  const retried = await revoke();
  assert.equal(retried.headers.get("retry-after"), "1");
  const retryMessage = await assertError(retried, 503, "service_unavailable", "json");
  assert.doesNotMatch(retryMessage, /os error|write-ahead/);
  assert.equal(held.syncs.length, syncsBefore + 1, "no sync after the failed one");
  // Readiness reports it, for good: the probe write does not clear it.
  for (let check = 0; check < 2; check++) {
    const degraded = await app.handler(new Request(`${BASE}/readyz`));
    assert.equal(degraded.status, 503);
    assert.equal(degraded.headers.get("content-type"), "application/json; charset=utf-8");
    assert.deepEqual(await degraded.json(), { status: "degraded", reason: "writes fail" });
  }
  // Reads go on: the committed revocation refuses the token.
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
  const rows = await app.querySql("SELECT revoked_at FROM tokens");
  assert.deepEqual(rows.map((row) => row.revoked_at), [app.clock.now()]);
});
