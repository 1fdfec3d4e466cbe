/**
 * createTokenStatusCache(): introspection's cache of token statuses, exact as the grant
 * cache is (grant_cache_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createTokenStatusCache } from "../../src/auth/grant_cache.ts";
import type { GrantEpoch, Store } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openTempStore } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { NO_AUDIT, seed, TOKEN } from "../_helpers/grant_seed.ts";

/** Counts the store's token-status lookups. */
function countingStatus(store: Store, epoch?: () => GrantEpoch | undefined) {
  let lookups = 0;
  return {
    lookups: () => lookups,
    store: {
      readGrantEpoch: epoch ?? (() => store.readGrantEpoch()),
      readGrantChanges: epoch ? () => undefined : (since: number) => store.readGrantChanges(since),
      findTokenStatus: (hash: Uint8Array, now: number) => {
        lookups++;
        return store.findTokenStatus(hash, now);
      },
    },
  };
}

Deno.test("createTokenStatusCache() answers repeated introspections of a live token from memory", async () => {
  using db = openTempStore();
  const { store } = db;
  const { key } = await seed(store);
  const spy = countingStatus(store);
  const find = createTokenStatusCache(spy.store);
  const first = await find(TOKEN, 2000);
  assert.deepEqual(
    { live: first?.live, email: first?.email, apiKeyId: first?.apiKeyId },
    { live: true, email: "a@b.org", apiKeyId: key.id },
  );
  const hit = find(TOKEN, 2000);
  assert.ok(!(hit instanceof Promise), "a hit is synchronous");
  assert.equal(hit, first);
  assert.equal(spy.lookups(), 1);
  assert.equal(await find("b".repeat(40), 2000), undefined);
  assert.equal(await find("b".repeat(40), 2000), undefined);
  assert.equal(spy.lookups(), 3, "unknown tokens are never cached");
});

Deno.test("createTokenStatusCache() sees another connection's revocation at once, and keeps no ended token", async () => {
  const db = tempDbPath();
  const server = openSqliteStore(db.path);
  const admin = openSqliteStore(db.path); // a second connection, as the admin CLI has
  try {
    const { user } = await seed(server);
    const spy = countingStatus(server);
    const find = createTokenStatusCache(spy.store);
    assert.equal((await find(TOKEN, 2000))?.live, true);
    assert.equal((await find(TOKEN, 2000))?.live, true);
    assert.equal(spy.lookups(), 1);
    await admin.updateUserDisabled(user.id, { disabled: true, now: 3000, ...NO_AUDIT });
    assert.equal((await find(TOKEN, 3000))?.live, false);
    assert.equal((await find(TOKEN, 3000))?.live, false);
    assert.equal(spy.lookups(), 3, "an ended token is read again every time");
  } finally {
    await admin.closeStore();
    await server.closeStore();
    db.cleanup();
  }
});

Deno.test("createTokenStatusCache() keeps the expiry (capped by the key's) for the caller to check", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store, 5000);
  const find = createTokenStatusCache(store);
  assert.equal((await find(TOKEN, 4000))?.expiresAt, 5000);
  // Served from memory past the key's expiry: the introspection route compares expiresAt.
  assert.equal((await find(TOKEN, 6000))?.expiresAt, 5000);
});

Deno.test("createTokenStatusCache() serves nothing from memory while the store cannot confirm freshness", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  const spy = countingStatus(store, () => undefined);
  const find = createTokenStatusCache(spy.store);
  assert.equal((await find(TOKEN, 2000))?.live, true);
  assert.equal((await find(TOKEN, 2000))?.live, true);
  assert.equal(spy.lookups(), 2);
});
