/**
 * createKeyHolderCache(): the API-key gate's cache of key holders, exact as the grant cache
 * is (grant_cache_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createKeyHolderCache } from "../../src/auth/grant_cache.ts";
import type { Store } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openTempStore } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { KEY, NO_AUDIT, seed } from "../_helpers/grant_seed.ts";

/**
 * Counts the store's key-holder lookups; the cache is given no other read, so a miss is one
 * store read (the holder carries its key's expiry).
 */
function countingHolders(store: Store) {
  let lookups = 0;
  return {
    lookups: () => lookups,
    store: {
      readGrantEpoch: () => store.readGrantEpoch(),
      readGrantChanges: (since: number) => store.readGrantChanges(since),
      findKeyHolder: (hash: Uint8Array, now: number) => {
        lookups++;
        return store.findKeyHolder(hash, now);
      },
    },
  };
}

Deno.test("createKeyHolderCache() answers a usable key from memory, never caches an unknown one", async () => {
  using db = openTempStore();
  const { store } = db;
  const { key, user } = await seed(store);
  const spy = countingHolders(store);
  const find = createKeyHolderCache(spy.store);
  assert.deepEqual(await find(KEY, 2000), {
    apiKeyId: key.id,
    userId: user.id,
    email: "a@b.org",
    introspect: false,
    keyExpiresAt: null,
  });
  const hit = find(KEY, 2000);
  assert.ok(!(hit instanceof Promise), "a hit is synchronous");
  assert.equal(hit?.apiKeyId, key.id);
  assert.equal(spy.lookups(), 1);
  const unknown = "1f8fad5b-d9cb-469f-a165-70867728950e";
  assert.equal(await find(unknown, 2000), undefined);
  assert.equal(await find(unknown, 2000), undefined);
  assert.equal(spy.lookups(), 3);
});

Deno.test("createKeyHolderCache() sees another connection's key revocation at once", async () => {
  const db = tempDbPath();
  const server = openSqliteStore(db.path);
  const admin = openSqliteStore(db.path); // a second connection, as the admin CLI has
  try {
    const { key } = await seed(server);
    const find = createKeyHolderCache(server);
    assert.ok(await find(KEY, 2000));
    assert.ok(await find(KEY, 2000));
    await admin.revokeApiKey(key.id, { now: 3000, ...NO_AUDIT });
    assert.equal(await find(KEY, 3000), undefined);
  } finally {
    await admin.closeStore();
    await server.closeStore();
    db.cleanup();
  }
});

Deno.test("createKeyHolderCache() stops answering once the key expires, with no write", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store, 5000);
  const spy = countingHolders(store);
  const find = createKeyHolderCache(spy.store);
  assert.ok(await find(KEY, 4000));
  assert.ok(await find(KEY, 4999));
  assert.equal(spy.lookups(), 1);
  assert.equal(await find(KEY, 5000), undefined);
});
