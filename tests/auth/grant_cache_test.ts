import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import {
  createGrantCache,
  createKeyHolderCache,
  createTokenStatusCache,
} from "../../src/auth/grant_cache.ts";
import type { GrantEpoch, Store, TokenGrant } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openTempStore } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";

const KEY = "0f8fad5b-d9cb-469f-a165-70867728950e";
const TOKEN = "a".repeat(40);
const NO_AUDIT = { audit: undefined };

async function seed(store: Store, keyExpiresAt: number | null = null) {
  const user = await store.insertUser(
    { email: "a@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: 1000, ...NO_AUDIT },
  );
  const key = await store.insertApiKey(
    {
      userId: user.id,
      keyHash: hashSecret(KEY),
      prefix: "0f8fad5b",
      label: "",
      expiresAt: keyExpiresAt,
    },
    { now: 1000, ...NO_AUDIT },
  );
  await issueFor(store, { user, key }, TOKEN, 1000);
  return { user, key };
}

/** Issues one more token (valid until 90,000) to the seeded user and key. */
function issueFor(
  store: Store,
  { user, key }: { user: { id: number }; key: { id: number } },
  token: string,
  issuedAt: number,
  maxLiveTokens = 100,
) {
  return store.insertToken({
    tokenHash: hashSecret(token),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt,
    expiresAt: 90_000,
    maxLiveTokens,
  }, NO_AUDIT);
}

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

Deno.test("durability 'grants': a login's commit is not synced, a revocation's is, at once", async () => {
  using db = openTempStore({ durability: "grants" });
  const { store, sqlite } = db;
  const { user, key } = await seed(store); // new user, key and token: no sync
  assert.equal(sqlite.readWalSyncs(), 0);
  await store.insertToken({
    tokenHash: hashSecret("g".repeat(40)),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: 2000,
    expiresAt: 90_000,
    maxLiveTokens: 100,
  }, { audit: { at: 2000, actor: "test", action: "token.issued", subject: "token:2" } });
  assert.equal(sqlite.readWalSyncs(), 0, "a login is not synced");
  const grant = (await store.findTokenGrant({
    tokenHash: hashSecret(TOKEN),
    keyHash: hashSecret(KEY),
    now: 2000,
  }))!;
  await store.revokeToken(grant.tokenId, {
    now: 2100,
    audit: { at: 2100, actor: "test", action: "token.revoked", subject: "token:1" },
  });
  assert.equal(sqlite.readWalSyncs(), 1, "a revocation is synced once, after its commit");
  await store.updateApiKeyDisabled(key.id, { disabled: true, now: 2200, ...NO_AUDIT });
  assert.equal(sqlite.readWalSyncs(), 2);
  const full = openSqliteStore(db.path);
  try {
    await full.updateUserDisabled(user.id, { disabled: true, now: 2300, ...NO_AUDIT });
    assert.equal(full.sqlite.readWalSyncs(), 0, "durability 'full' leaves syncing to SQLite");
  } finally {
    await full.closeStore();
  }
});

Deno.test("durability 'grants' opens a database through a symbolic link", async () => {
  const db = tempDbPath();
  await openSqliteStore(db.path).closeStore();
  const link = `${db.dir}/link.sqlite3`;
  Deno.symlinkSync(db.path, link);
  const store = openSqliteStore(link, { durability: "grants" });
  try {
    const { user } = await seed(store);
    await store.updateUserDisabled(user.id, { disabled: true, now: 3000, ...NO_AUDIT });
    assert.equal(store.sqlite.readWalSyncs(), 1);
  } finally {
    await store.closeStore();
    db.cleanup();
  }
});

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

/** Counts the store's key-holder lookups. */
function countingHolders(store: Store) {
  let lookups = 0;
  return {
    lookups: () => lookups,
    store: {
      readGrantEpoch: () => store.readGrantEpoch(),
      readGrantChanges: (since: number) => store.readGrantChanges(since),
      findApiKeyById: (id: number) => store.findApiKeyById(id),
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
