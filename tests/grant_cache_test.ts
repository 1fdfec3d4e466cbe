import assert from "node:assert/strict";
import { hashSecret } from "../src/credentials.ts";
import { createGrantCache } from "../src/grant_cache.ts";
import { openStore, type Store } from "../src/store.ts";
import { tempDbPath } from "./_helpers.ts";

const KEY = "0f8fad5b-d9cb-469f-a165-70867728950e";
const TOKEN = "a".repeat(40);

function seed(store: Store, keyExpiresAt: number | null = null) {
  const user = store.insertUser(
    { email: "a@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
    1000,
  );
  const key = store.insertApiKey(
    {
      userId: user.id,
      keyHash: hashSecret(KEY),
      prefix: "0f8fad5b",
      label: "",
      expiresAt: keyExpiresAt,
    },
    1000,
  );
  store.issueToken({
    tokenHash: hashSecret(TOKEN),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: 1000,
    expiresAt: 90_000,
    maxLiveTokens: 100,
  });
  return { user, key };
}

/** Counts the store's grant lookups. */
function counting(store: Store) {
  let lookups = 0;
  return {
    lookups: () => lookups,
    store: {
      readChangeStamp: () => store.readChangeStamp(),
      findTokenGrant: (...args: Parameters<Store["findTokenGrant"]>) => {
        lookups++;
        return store.findTokenGrant(...args);
      },
    },
  };
}

Deno.test("createGrantCache() answers repeats from memory while nothing changes", () => {
  const db = tempDbPath();
  const store = openStore(db.path);
  try {
    seed(store);
    const spy = counting(store);
    const find = createGrantCache(spy.store);
    for (let i = 0; i < 5; i++) assert.equal(find(KEY, TOKEN, 2000)?.email, "a@b.org");
    assert.equal(spy.lookups(), 1);
    assert.equal(find(KEY, "b".repeat(40), 2000), undefined);
    assert.equal(find(KEY, "b".repeat(40), 2000), undefined);
    assert.equal(spy.lookups(), 3, "misses are never cached");
  } finally {
    store.close();
    db.cleanup();
  }
});

Deno.test("createGrantCache() sees another process's revocation at once", () => {
  const db = tempDbPath();
  const server = openStore(db.path);
  const admin = openStore(db.path); // a second connection, as the admin CLI has
  try {
    const { key } = seed(server);
    const find = createGrantCache(server);
    assert.ok(find(KEY, TOKEN, 2000));
    admin.revokeApiKey(key.id, 3000);
    assert.equal(find(KEY, TOKEN, 3000), undefined);
  } finally {
    admin.close();
    server.close();
    db.cleanup();
  }
});

Deno.test("createGrantCache() sees this connection's own writes at once", () => {
  const db = tempDbPath();
  const store = openStore(db.path);
  try {
    seed(store);
    const find = createGrantCache(store);
    const grant = find(KEY, TOKEN, 2000)!;
    store.revokeToken(grant.tokenId, 2500);
    assert.equal(find(KEY, TOKEN, 2600), undefined);
  } finally {
    store.close();
    db.cleanup();
  }
});

Deno.test("createGrantCache() stops answering once the key expires, with no write", () => {
  const db = tempDbPath();
  const store = openStore(db.path);
  try {
    seed(store, 5000);
    const spy = counting(store);
    const find = createGrantCache(spy.store);
    assert.equal(find(KEY, TOKEN, 4000)?.keyExpiresAt, 5000);
    assert.equal(find(KEY, TOKEN, 4999)?.keyExpiresAt, 5000);
    assert.equal(spy.lookups(), 1);
    assert.equal(find(KEY, TOKEN, 5000), undefined);
  } finally {
    store.close();
    db.cleanup();
  }
});

Deno.test("createGrantCache() starts afresh when full", () => {
  const db = tempDbPath();
  const store = openStore(db.path);
  try {
    const { user, key } = seed(store);
    const other = "c".repeat(40);
    store.issueToken({
      tokenHash: hashSecret(other),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: 1000,
      expiresAt: 90_000,
      maxLiveTokens: 100,
    });
    const spy = counting(store);
    const find = createGrantCache(spy.store, 1);
    find(KEY, TOKEN, 2000);
    find(KEY, TOKEN, 2000);
    assert.equal(spy.lookups(), 1);
    find(KEY, other, 2000); // full: forgets TOKEN
    find(KEY, TOKEN, 2000);
    assert.equal(spy.lookups(), 3);
  } finally {
    store.close();
    db.cleanup();
  }
});

Deno.test("createGrantCache() caches on one store each see a change made through the store", () => {
  const db = tempDbPath();
  const store = openStore(db.path);
  try {
    const { user } = seed(store);
    const first = createGrantCache(store);
    const second = createGrantCache(store);
    assert.ok(first(KEY, TOKEN, 2000));
    assert.ok(second(KEY, TOKEN, 2000));
    store.setUserDisabled(user.id, true, 3000);
    assert.equal(first(KEY, TOKEN, 3000), undefined);
    assert.equal(second(KEY, TOKEN, 3000), undefined);
  } finally {
    store.close();
    db.cleanup();
  }
});

Deno.test("createGrantCache() hands out frozen grants", () => {
  const db = tempDbPath();
  const store = openStore(db.path);
  try {
    seed(store);
    const find = createGrantCache(store);
    const grant = find(KEY, TOKEN, 2000)!;
    assert.throws(() => {
      (grant as { email: string }).email = "mallory@example.org";
    }, TypeError);
    assert.equal(find(KEY, TOKEN, 2000)!.email, "a@b.org");
  } finally {
    store.close();
    db.cleanup();
  }
});
