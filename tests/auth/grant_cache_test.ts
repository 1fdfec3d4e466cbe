/**
 * createGrantCache(): the secure path's cache of grants, exact under every kind of write
 * (the token-status and key-holder caches: grant_cache_status_test.ts,
 * grant_cache_holder_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createGrantCache } from "../../src/auth/grant_cache.ts";
import type { GrantEpoch, Store, TokenGrant } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openTempStore } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { issueFor, KEY, NO_AUDIT, seed, TOKEN } from "../_helpers/grant_seed.ts";

/** Counts the store's grant lookups; `epoch` may replace the store's change feed. */
function counting(store: Store, epoch?: () => GrantEpoch | undefined) {
  let lookups = 0;
  return {
    lookups: () => lookups,
    store: {
      readGrantEpoch: epoch ?? (() => store.readGrantEpoch()),
      // A stand-in position cannot say what changed: every move drops everything.
      readGrantChanges: epoch ? () => undefined : (since: number) => store.readGrantChanges(since),
      findTokenGrant: (lookup: Parameters<Store["findTokenGrant"]>[0]) => {
        lookups++;
        return store.findTokenGrant(lookup);
      },
    },
  };
}

Deno.test("createGrantCache() answers repeats from memory while nothing changes", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  const spy = counting(store);
  const find = createGrantCache(spy.store);
  for (let i = 0; i < 5; i++) assert.equal((await find(KEY, TOKEN, 2000))?.email, "a@b.org");
  assert.equal(spy.lookups(), 1);
  assert.equal(await find(KEY, "b".repeat(40), 2000), undefined);
  assert.equal(await find(KEY, "b".repeat(40), 2000), undefined);
  assert.equal(spy.lookups(), 3, "misses are never cached");
});

Deno.test("createGrantCache() answers a hit synchronously, a miss through the store", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  const find = createGrantCache(store);
  const miss = find(KEY, TOKEN, 2000);
  assert.ok(miss instanceof Promise, "a miss waits for the store");
  const grant = await miss;
  const hit = find(KEY, TOKEN, 2000);
  assert.ok(!(hit instanceof Promise), "a hit is no Promise");
  assert.equal(hit, grant);
});

Deno.test("createGrantCache() sees another process's revocation at once", async () => {
  const db = tempDbPath();
  const server = openSqliteStore(db.path);
  const admin = openSqliteStore(db.path); // a second connection, as the admin CLI has
  try {
    const { key } = await seed(server);
    const find = createGrantCache(server);
    assert.ok(await find(KEY, TOKEN, 2000));
    await admin.revokeApiKey(key.id, { now: 3000, ...NO_AUDIT });
    assert.equal(await find(KEY, TOKEN, 3000), undefined);
  } finally {
    await admin.closeStore();
    await server.closeStore();
    db.cleanup();
  }
});

Deno.test("createGrantCache() sees this connection's own writes at once", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  const find = createGrantCache(store);
  const grant = (await find(KEY, TOKEN, 2000))!;
  await store.revokeToken(grant.tokenId, { now: 2500, ...NO_AUDIT });
  assert.equal(await find(KEY, TOKEN, 2600), undefined);
});

Deno.test("createGrantCache() stops answering once the key expires, with no write", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store, 5000);
  const spy = counting(store);
  const find = createGrantCache(spy.store);
  assert.equal((await find(KEY, TOKEN, 4000))?.keyExpiresAt, 5000);
  assert.equal((await find(KEY, TOKEN, 4999))?.keyExpiresAt, 5000);
  assert.equal(spy.lookups(), 1);
  assert.equal(await find(KEY, TOKEN, 5000), undefined);
});

Deno.test("createGrantCache() starts afresh when full", async () => {
  using db = openTempStore();
  const { store } = db;
  const { user, key } = await seed(store);
  const other = "c".repeat(40);
  await issueFor(store, { user, key }, other, 1000);
  const spy = counting(store);
  const find = createGrantCache(spy.store, 1);
  await find(KEY, TOKEN, 2000);
  await find(KEY, TOKEN, 2000);
  assert.equal(spy.lookups(), 1);
  await find(KEY, other, 2000); // full: forgets TOKEN
  await find(KEY, TOKEN, 2000);
  assert.equal(spy.lookups(), 3);
});

Deno.test("createGrantCache() of size 0 keeps nothing: every lookup reads the store", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  const spy = counting(store);
  const find = createGrantCache(spy.store, 0);
  for (let i = 0; i < 3; i++) {
    const found = find(KEY, TOKEN, 2000);
    assert.ok(found instanceof Promise, "never answered from memory");
    assert.equal((await found)?.email, "a@b.org");
  }
  assert.equal(spy.lookups(), 3);
});

Deno.test("createGrantCache() caches on one store each see a change made through the store", async () => {
  using db = openTempStore();
  const { store } = db;
  const { user } = await seed(store);
  const first = createGrantCache(store);
  const second = createGrantCache(store);
  assert.ok(await first(KEY, TOKEN, 2000));
  assert.ok(await second(KEY, TOKEN, 2000));
  await store.updateUserDisabled(user.id, { disabled: true, now: 3000, ...NO_AUDIT });
  assert.equal(await first(KEY, TOKEN, 3000), undefined);
  assert.equal(await second(KEY, TOKEN, 3000), undefined);
});

Deno.test("createGrantCache() hands out frozen grants", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  const find = createGrantCache(store);
  const grant = (await find(KEY, TOKEN, 2000))!;
  assert.throws(() => {
    (grant as { email: string }).email = "mallory@example.org";
  }, TypeError);
  assert.equal((await find(KEY, TOKEN, 2000))!.email, "a@b.org");
});

Deno.test("createGrantCache() keeps its grants across writes that end none (a login)", async () => {
  using db = openTempStore();
  const { store } = db;
  const { user, key } = await seed(store);
  const spy = counting(store);
  const find = createGrantCache(spy.store);
  assert.ok(await find(KEY, TOKEN, 2000));
  await issueFor(store, { user, key }, "d".repeat(40), 2100);
  await store.recordKeyUsage([{
    apiKeyId: key.id,
    lastUsedAt: 2200,
    lastUsedFrom: "192.0.2.1",
    count: 1,
  }]);
  await store.appendAudit({ at: 2300, actor: "test", action: "token.issued", subject: "token:2" });
  assert.ok(await find(KEY, TOKEN, 2400));
  assert.equal(spy.lookups(), 1, "answered from memory after the login's writes");
});

Deno.test("createGrantCache() forgets a grant the live-token cap ends", async () => {
  using db = openTempStore();
  const { store } = db;
  const { user, key } = await seed(store);
  const find = createGrantCache(store);
  assert.ok(await find(KEY, TOKEN, 2000));
  await issueFor(store, { user, key }, "e".repeat(40), 2100, 1); // the newest only: TOKEN is revoked
  assert.equal(await find(KEY, TOKEN, 2200), undefined);
});

Deno.test("createGrantCache() serves nothing from memory while the store cannot confirm freshness", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  let fresh = true;
  const spy = counting(store, () => fresh ? 1 : undefined);
  const find = createGrantCache(spy.store);
  assert.ok(await find(KEY, TOKEN, 2000));
  assert.ok(await find(KEY, TOKEN, 2000));
  assert.equal(spy.lookups(), 1);
  fresh = false;
  assert.ok(await find(KEY, TOKEN, 2000));
  assert.ok(await find(KEY, TOKEN, 2000));
  assert.equal(spy.lookups(), 3, "every request goes to the store");
  // A store that cannot answer either fails closed: the lookup's error reaches the caller.
  const down = createGrantCache({
    readGrantEpoch: () => undefined,
    readGrantChanges: () => undefined,
    findTokenGrant: () => Promise.reject(new Error("unreachable")),
  });
  await assert.rejects(Promise.resolve(down(KEY, TOKEN, 2000)), /unreachable/);
  fresh = true;
  assert.ok(await find(KEY, TOKEN, 2000));
  assert.equal(spy.lookups(), 3, "answered from memory again once confirmed: nothing moved");
});

Deno.test("createGrantCache() does not cache a grant read while the epoch moved", async () => {
  using db = openTempStore();
  const { store } = db;
  await seed(store);
  let epoch = 1;
  let lookups = 0;
  const find = createGrantCache({
    readGrantEpoch: () => epoch,
    readGrantChanges: () => undefined,
    findTokenGrant: async (lookup) => {
      lookups++;
      const grant: TokenGrant | undefined = await store.findTokenGrant(lookup);
      epoch++; // a revocation committed elsewhere while the lookup was on its way
      return grant;
    },
  });
  assert.ok(await find(KEY, TOKEN, 2000));
  assert.ok(await find(KEY, TOKEN, 2000));
  assert.equal(lookups, 2, "the first grant was not cached");
});

Deno.test({
  name: "createGrantCache() sees another connection's commit through the WAL index alone",
  ignore: Deno.build.os !== "linux", // elsewhere it asks SQLite every time
}, async () => {
  const db = tempDbPath();
  const server = openSqliteStore(db.path);
  const admin = openSqliteStore(db.path);
  try {
    const { user } = await seed(server);
    const find = createGrantCache(server);
    assert.ok(await find(KEY, TOKEN, 2000));
    const before = server.sqlite.readDataVersionReads();
    for (let i = 0; i < 10; i++) assert.ok(await find(KEY, TOKEN, 2000));
    assert.equal(
      server.sqlite.readDataVersionReads(),
      before,
      "no SQLite call while nothing is committed",
    );
    await admin.updateUserDisabled(user.id, { disabled: true, now: 3000, ...NO_AUDIT });
    assert.equal(await find(KEY, TOKEN, 3000), undefined);
  } finally {
    await admin.closeStore();
    await server.closeStore();
    db.cleanup();
  }
});
