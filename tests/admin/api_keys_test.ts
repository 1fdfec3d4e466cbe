/**
 * The admin API through its real handler and a real store: API keys (create,
 * list, rotate, revoke, disable) and the tokens they end.
 * Every answer is also checked against the OpenAPI document (see tests/_helpers/admin_api.ts).
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import type { Store } from "../../src/store/store.ts";
import { changingBefore } from "../_helpers/store_before.ts";
import { createAdminTest } from "../_helpers/admin_api.ts";

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

Deno.test("[admin] POST /admin/v1/keys/{id}/rotate of a key revoked meanwhile is 409 conflict", async () => {
  let armed = false;
  // A revocation that commits after the route read the key, just before the rotation's write.
  const revokingFirst = (store: Store): Store =>
    changingBefore(store, "rotateApiKey", (target, args) => {
      const [id, options] = args as Parameters<Store["rotateApiKey"]>;
      return target.revokeApiKey(id, { now: options.now, audit: undefined });
    }, () => armed);
  await using t = await createAdminTest({ wrapStore: revokingFirst });
  const id = await t.addUser("ann@example.org");
  const created = await t.call("POST", `/admin/v1/users/${id}/keys`, { body: { label: "app" } });
  armed = true;
  const late = await t.call("POST", `/admin/v1/keys/${created.body.key.id}/rotate`, { body: {} });
  assert.equal(late.status, 409);
  assert.match(late.headers.get("content-type") ?? "", /^application\/json/);
  assert.deepEqual(late.body.error.code, "conflict");
  assert.equal(
    late.body.error.message,
    `Cannot rotate API key ${created.body.key.id}: it was rotated or revoked meanwhile`,
  );
  const keys = await t.store.listApiKeys(id);
  assert.deepEqual(keys.map((key) => [key.id, key.replacedBy, key.revokedAt !== null]), [
    [created.body.key.id, null, true],
  ]);
  assert.deepEqual(
    (await t.store.listAudit()).filter((row) => row.action === "key.rotated"),
    [],
  );
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
