/**
 * A signed-in portal user rotates and revokes their own API keys end to end (real handler,
 * test store on both backends, the test app's movable clock): the new key is shown once, both
 * keys work during the overlap and only the new one after it, a revoked key's tokens are
 * refused, another user's key and a malformed id are "not found", CSRF is required, and the
 * audit log says what happened without a secret.
 *
 * @module
 */
import assert from "node:assert/strict";
import { issueToken, jsonAuthRequest, postToken, secureGet } from "../_helpers/requests.ts";
import { activeUser, startPortalRig } from "./_portal.ts";
import { assertError, json, OTHER_PASSWORD, PASSWORD } from "./_portal_answers.ts";
import type { Handler } from "../../src/http/app.ts";
import { toKeyRef } from "../../src/auth/audit.ts";

const SECURE_PATH = "/api/secure/userservice/tokens/current";

/** The status of a secure request with this key and token (the body read). */
async function secureStatus(handler: Handler, apiKey: string, token: string): Promise<number> {
  const response = await secureGet(handler, SECURE_PATH, apiKey, token);
  await response.body?.cancel();
  return response.status;
}

/** The status of a token request with this key (the body read). */
async function tokenStatus(handler: Handler, email: string, apiKey: string): Promise<number> {
  const response = await postToken(handler, jsonAuthRequest(email, PASSWORD, apiKey), {
    "content-type": "application/json",
    accept: "application/json",
  });
  await response.body?.cancel();
  return response.status;
}

Deno.test("[e2e] POST /api/portal/v1/keys/:id/rotate shows the new key once; both work until old_key_until", async () => {
  await using rig = await startPortalRig();
  const email = "rotator@example.org";
  const browser = await activeUser(rig, email);
  const { handler, clock, store } = rig.app;
  const created = await json(await browser.call("POST", "/keys", { label: "ci" }));
  const oldKey: string = created.api_key;
  const oldToken = await issueToken(handler, email, PASSWORD, oldKey);

  const response = await browser.call("POST", `/keys/${created.key.id}/rotate`, {
    grace_seconds: 3600,
  });
  assert.equal(response.status, 201);
  const rotated = await json(response);
  assert.deepEqual(Object.keys(rotated).sort(), ["api_key", "key", "old_key_until"]);
  const newKey: string = rotated.api_key;
  assert.notEqual(newKey, oldKey);
  assert.notEqual(rotated.key.id, created.key.id);
  assert.equal(rotated.key.label, "ci", "the successor keeps the label");
  assert.equal(rotated.key.prefix, newKey.slice(0, rotated.key.prefix.length));
  assert.equal(rotated.old_key_until, new Date(clock.now() + 3600_000).toISOString());
  // Shown once: the listing never holds a key itself, and the store holds only its digest.
  const listing = await json(await browser.call("GET", "/keys"));
  assert.ok(!JSON.stringify(listing).includes(newKey));
  assert.ok(!JSON.stringify(listing).includes(oldKey));
  const byId = new Map(listing.keys.map((key: { id: number }) => [key.id, key]));
  assert.equal((byId.get(created.key.id) as { replaced_by: number }).replaced_by, rotated.key.id);
  const stored = await store.findApiKeyById(rotated.key.id);
  assert.ok(stored !== undefined && !JSON.stringify(stored).includes(newKey));
  assert.equal(rig.smtp.received.some((mail) => mail.raw.includes(newKey)), false, "never mailed");

  // The overlap: both keys get tokens and make secure requests.
  const newToken = await issueToken(handler, email, PASSWORD, newKey);
  assert.equal(await tokenStatus(handler, email, oldKey), 200);
  assert.equal(await secureStatus(handler, oldKey, oldToken), 200);
  assert.equal(await secureStatus(handler, newKey, newToken), 200);

  // After it: only the new key.
  clock.advance(3600_000 + 1000);
  assert.equal(await secureStatus(handler, oldKey, oldToken), 401, "the old key's token ended");
  assert.equal(await tokenStatus(handler, email, oldKey), 401, "the old key gets no token");
  assert.equal(await secureStatus(handler, newKey, newToken), 200);
  assert.equal(await tokenStatus(handler, email, newKey), 200);

  // A key rotated once is not rotated again.
  await assertError(
    await browser.call("POST", `/keys/${created.key.id}/rotate`, {}),
    409,
    "conflict",
  );
  const audit = await store.listAudit();
  const rotatedRow = audit.find((row) => row.action === "key.rotated");
  assert.equal(rotatedRow?.subject, toKeyRef(created.key.id));
  const user = (await store.findUserByEmail(email))!;
  assert.equal(rotatedRow?.actor, `portal:user:${user.id}`);
  assert.deepEqual(rotatedRow?.detail, {
    successor: rotated.key.id,
    old_key_until: rotated.old_key_until,
  });
  const createdRow = audit.find((row) =>
    row.action === "key.created" && row.subject === toKeyRef(rotated.key.id)
  );
  assert.ok(createdRow, "the successor's creation is audited");
  for (const row of audit) {
    const text = JSON.stringify(row);
    assert.ok(!text.includes(newKey) && !text.includes(oldKey), `no key in ${row.action}`);
    assert.ok(!text.includes(oldToken) && !text.includes(newToken), `no token in ${row.action}`);
    assert.ok(!text.includes(PASSWORD), `no password in ${row.action}`);
  }
});

Deno.test("[e2e] DELETE /api/portal/v1/keys/:id revokes the user's key and its tokens", async () => {
  await using rig = await startPortalRig();
  const email = "revoker@example.org";
  const browser = await activeUser(rig, email);
  const { handler, store } = rig.app;
  const user = (await store.findUserByEmail(email))!;
  const created = await json(await browser.call("POST", "/keys", { label: "to go" }));
  const kept = await json(await browser.call("POST", "/keys", { label: "kept" }));
  const tokens = [
    await issueToken(handler, email, PASSWORD, created.api_key),
    await issueToken(handler, email, PASSWORD, created.api_key),
  ];
  const keptToken = await issueToken(handler, email, PASSWORD, kept.api_key);

  // CSRF is required: the session's cookie alone changes nothing.
  const csrfless = rig.browser();
  csrfless.cookie = browser.cookie;
  await assertError(await csrfless.call("DELETE", `/keys/${created.key.id}`), 403, "csrf_failed");
  const forged = rig.browser();
  forged.cookie = browser.cookie;
  forged.csrf = "A".repeat(browser.csrf!.length);
  await assertError(await forged.call("DELETE", `/keys/${created.key.id}`), 403, "csrf_failed");
  await assertError(
    await forged.call("POST", `/keys/${created.key.id}/rotate`, {}),
    403,
    "csrf_failed",
  );
  assert.equal((await store.findApiKeyById(created.key.id))?.revokedAt, null);
  assert.equal((await store.findApiKeyById(created.key.id))?.replacedBy, null);

  const response = await browser.call("DELETE", `/keys/${created.key.id}`);
  assert.equal(response.status, 200);
  assert.deepEqual(await json(response), { status: "revoked", tokens_revoked: 2 });
  assert.notEqual((await store.findApiKeyById(created.key.id))?.revokedAt, null);
  for (const token of tokens) {
    assert.equal(await secureStatus(handler, created.api_key, token), 401, "its tokens refused");
  }
  assert.equal(await tokenStatus(handler, email, created.api_key), 401, "it gets no token");
  assert.equal(await secureStatus(handler, kept.api_key, keptToken), 200, "the other key stays");
  const listing = await json(await browser.call("GET", "/keys"));
  const gone = listing.keys.find((key: { id: number }) => key.id === created.key.id);
  assert.equal(gone.status, "revoked");

  // Again: nothing more to end.
  const again = await browser.call("DELETE", `/keys/${created.key.id}`);
  assert.equal(again.status, 200);
  assert.deepEqual(await json(again), { status: "revoked", tokens_revoked: 0 });

  const rows = (await store.listAudit()).filter((row) => row.action === "key.revoked");
  assert.equal(rows.length, 1, "audited once");
  assert.equal(rows[0].subject, toKeyRef(created.key.id));
  assert.equal(rows[0].actor, `portal:user:${user.id}`);
  assert.deepEqual(rows[0].detail, { tokens_revoked: 2 });
  for (const row of await store.listAudit()) {
    const text = JSON.stringify(row);
    assert.ok(!text.includes(created.api_key) && !text.includes(kept.api_key), row.action);
    assert.ok(!tokens.some((token) => text.includes(token)), row.action);
  }
});

Deno.test("[e2e] rotate and revoke answer 404 for another user's key and a malformed id", async () => {
  await using rig = await startPortalRig();
  const owner = await activeUser(rig, "owner@example.org");
  const stranger = await activeUser(rig, "stranger@example.org", OTHER_PASSWORD);
  const { store } = rig.app;
  const created = await json(await owner.call("POST", "/keys", { label: "mine" }));
  const id = created.key.id;

  await assertError(await stranger.call("POST", `/keys/${id}/rotate`, {}), 404, "not_found");
  await assertError(await stranger.call("DELETE", `/keys/${id}`), 404, "not_found");
  const unknown = id + 1000;
  await assertError(await owner.call("POST", `/keys/${unknown}/rotate`, {}), 404, "not_found");
  await assertError(await owner.call("DELETE", `/keys/${unknown}`), 404, "not_found");
  for (const bad of ["0", "-1", "1.5", "abc", "1e3", "99999999999999999999", "%20"]) {
    await assertError(await owner.call("POST", `/keys/${bad}/rotate`, {}), 404, "not_found", bad);
    await assertError(await owner.call("DELETE", `/keys/${bad}`), 404, "not_found", bad);
  }
  // A grace that is not a whole number ≥ 0 is the caller's mistake.
  for (const grace of [-1, 1.5, "60", null]) {
    await assertError(
      await owner.call("POST", `/keys/${id}/rotate`, { grace_seconds: grace }),
      400,
      "invalid_request",
      String(grace),
    );
  }
  const key = await store.findApiKeyById(id);
  assert.equal(key?.revokedAt, null, "still live");
  assert.equal(key?.replacedBy, null, "not rotated");
  assert.ok(
    !(await store.listAudit()).some((row) => ["key.rotated", "key.revoked"].includes(row.action)),
    "nothing audited",
  );
  assert.equal(
    await tokenStatus(rig.app.handler, "owner@example.org", created.api_key),
    200,
    "the owner's key still works",
  );
});
