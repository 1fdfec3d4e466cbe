import assert from "node:assert/strict";
import { hashSecret } from "../src/auth/credentials.ts";
import { createGrantCache } from "../src/auth/grant_cache.ts";
import { openStore, type Store } from "../src/store/sqlite/store.ts";
import { openTempStore, tempDbPath } from "./_helpers.ts";

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
  issueFor(store, { user, key }, TOKEN, 1000);
  return { user, key };
}

/** Counts the store's grant lookups. */
function counting(store: Store) {
  let lookups = 0;
  return {
    lookups: () => lookups,
    store: {
      readCommitCount: () => store.readCommitCount(),
      readDataVersion: () => store.readDataVersion(),
      readGrantWrites: () => store.readGrantWrites(),
      findTokenGrant: (...args: Parameters<Store["findTokenGrant"]>) => {
        lookups++;
        return store.findTokenGrant(...args);
      },
    },
  };
}

Deno.test("createGrantCache() answers repeats from memory while nothing changes", () => {
  using db = openTempStore();
  const { store } = db;
  seed(store);
  const spy = counting(store);
  const find = createGrantCache(spy.store);
  for (let i = 0; i < 5; i++) assert.equal(find(KEY, TOKEN, 2000)?.email, "a@b.org");
  assert.equal(spy.lookups(), 1);
  assert.equal(find(KEY, "b".repeat(40), 2000), undefined);
  assert.equal(find(KEY, "b".repeat(40), 2000), undefined);
  assert.equal(spy.lookups(), 3, "misses are never cached");
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
  using db = openTempStore();
  const { store } = db;
  seed(store);
  const find = createGrantCache(store);
  const grant = find(KEY, TOKEN, 2000)!;
  store.revokeToken(grant.tokenId, 2500);
  assert.equal(find(KEY, TOKEN, 2600), undefined);
});

Deno.test("createGrantCache() stops answering once the key expires, with no write", () => {
  using db = openTempStore();
  const { store } = db;
  seed(store, 5000);
  const spy = counting(store);
  const find = createGrantCache(spy.store);
  assert.equal(find(KEY, TOKEN, 4000)?.keyExpiresAt, 5000);
  assert.equal(find(KEY, TOKEN, 4999)?.keyExpiresAt, 5000);
  assert.equal(spy.lookups(), 1);
  assert.equal(find(KEY, TOKEN, 5000), undefined);
});

Deno.test("createGrantCache() starts afresh when full", () => {
  using db = openTempStore();
  const { store } = db;
  const { user, key } = seed(store);
  const other = "c".repeat(40);
  issueFor(store, { user, key }, other, 1000);
  const spy = counting(store);
  const find = createGrantCache(spy.store, 1);
  find(KEY, TOKEN, 2000);
  find(KEY, TOKEN, 2000);
  assert.equal(spy.lookups(), 1);
  find(KEY, other, 2000); // full: forgets TOKEN
  find(KEY, TOKEN, 2000);
  assert.equal(spy.lookups(), 3);
});

Deno.test("createGrantCache() caches on one store each see a change made through the store", () => {
  using db = openTempStore();
  const { store } = db;
  const { user } = seed(store);
  const first = createGrantCache(store);
  const second = createGrantCache(store);
  assert.ok(first(KEY, TOKEN, 2000));
  assert.ok(second(KEY, TOKEN, 2000));
  store.setUserDisabled(user.id, true, 3000);
  assert.equal(first(KEY, TOKEN, 3000), undefined);
  assert.equal(second(KEY, TOKEN, 3000), undefined);
});

Deno.test("createGrantCache() hands out frozen grants", () => {
  using db = openTempStore();
  const { store } = db;
  seed(store);
  const find = createGrantCache(store);
  const grant = find(KEY, TOKEN, 2000)!;
  assert.throws(() => {
    (grant as { email: string }).email = "mallory@example.org";
  }, TypeError);
  assert.equal(find(KEY, TOKEN, 2000)!.email, "a@b.org");
});

Deno.test("createGrantCache() keeps its grants across writes that end none (a login)", () => {
  using db = openTempStore();
  const { store } = db;
  const { user, key } = seed(store);
  const spy = counting(store);
  const find = createGrantCache(spy.store);
  assert.ok(find(KEY, TOKEN, 2000));
  issueFor(store, { user, key }, "d".repeat(40), 2100);
  store.recordKeyUsage([{
    apiKeyId: key.id,
    lastUsedAt: 2200,
    lastUsedFrom: "192.0.2.1",
    count: 1,
  }]);
  store.appendAudit({ at: 2300, actor: "test", action: "token.issued", subject: "token:2" });
  assert.ok(find(KEY, TOKEN, 2400));
  assert.equal(spy.lookups(), 1, "answered from memory after the login's writes");
});

Deno.test("createGrantCache() forgets a grant the live-token cap ends", () => {
  using db = openTempStore();
  const { store } = db;
  const { user, key } = seed(store);
  const find = createGrantCache(store);
  assert.ok(find(KEY, TOKEN, 2000));
  issueFor(store, { user, key }, "e".repeat(40), 2100, 1); // the newest only: TOKEN is revoked
  assert.equal(find(KEY, TOKEN, 2200), undefined);
});

Deno.test({
  name: "createGrantCache() sees another connection's commit through the WAL index alone",
  ignore: Deno.build.os !== "linux", // elsewhere it asks SQLite every time
}, () => {
  const db = tempDbPath();
  const server = openStore(db.path);
  const admin = openStore(db.path);
  try {
    const { user } = seed(server);
    let dataVersionReads = 0;
    const find = createGrantCache({
      findTokenGrant: (...args) => server.findTokenGrant(...args),
      readCommitCount: () => server.readCommitCount(),
      readGrantWrites: () => server.readGrantWrites(),
      readDataVersion: () => (dataVersionReads++, server.readDataVersion()),
    });
    assert.ok(find(KEY, TOKEN, 2000));
    const before = dataVersionReads;
    for (let i = 0; i < 10; i++) assert.ok(find(KEY, TOKEN, 2000));
    assert.equal(dataVersionReads, before, "no SQLite call while nothing is committed");
    admin.setUserDisabled(user.id, true, 3000);
    assert.equal(find(KEY, TOKEN, 3000), undefined);
  } finally {
    admin.close();
    server.close();
    db.cleanup();
  }
});

Deno.test("Store.readGrantWrites() moves with each write that can end a grant, and no other", () => {
  using db = openTempStore();
  const { store } = db;
  const { user, key } = seed(store);
  const token = store.findTokenGrant(hashSecret(TOKEN), hashSecret(KEY), 2000)!;
  const subject = "key:1|a@b.org";
  const keeps: [string, () => void][] = [
    [
      "insertUser",
      () =>
        store.insertUser(
          { email: "c@d.org", passwordHash: "x", tokenTimeoutSeconds: null },
          2000,
        ),
    ],
    ["issueToken under the cap", () => issueFor(store, { user, key }, "f".repeat(40), 2000)],
    [
      "recordKeyUsage",
      () =>
        store.recordKeyUsage([{
          apiKeyId: key.id,
          lastUsedAt: 2000,
          lastUsedFrom: "::1",
          count: 1,
        }]),
    ],
    [
      "appendAudit",
      () => store.appendAudit({ at: 2000, actor: "test", action: "test", subject: "test" }),
    ],
    ["recordLoginFailures", () =>
      store.recordLoginFailures([subject], 2000, () => ({
        subject,
        failures: 1,
        lastFailureAt: 2000,
        blockedUntil: 0,
        forgetAt: 9000,
      }))],
    ["clearLoginFailures", () => store.clearLoginFailures(subject)],
  ];
  for (const [name, write] of keeps) {
    const before = store.readGrantWrites();
    write();
    assert.equal(store.readGrantWrites(), before, `${name} keeps grants`);
  }
  const ends: [string, () => void][] = [
    ["setUserTimeout", () => store.setUserTimeout(user.id, 60, 2000)],
    ["setApiKeyDisabled", () => store.setApiKeyDisabled(key.id, true, 2000)],
    ["setUserDisabled", () => store.setUserDisabled(user.id, true, 2000)],
    ["setUserPassword", () => store.setUserPassword(user.id, "y", 2000)],
    ["revokeToken", () => store.revokeToken(token.tokenId, 2000)],
    ["revokeTokenOfKey", () => store.revokeTokenOfKey(hashSecret("f".repeat(40)), key.id, 2000)],
    ["revokeTokensIssuedBefore", () => store.revokeTokensIssuedBefore(user.id, 2500, 2500)],
    ["rotateApiKey", () =>
      store.rotateApiKey(key.id, {
        userId: user.id,
        keyHash: hashSecret("0f8fad5b-d9cb-469f-a165-70867728950f"),
        prefix: "0f8fad5b",
        label: "",
      }, { oldKeyExpiresAt: 5000, now: 3000 })],
    ["revokeTokensOfUser", () => store.revokeTokensOfUser(user.id, 4000)],
    ["revokeApiKey", () => store.revokeApiKey(key.id, 4000)],
    ["purgeTokens", () => store.purgeTokens(10_000_000)], // an expired token's 401 changes
  ];
  for (const [name, write] of ends) {
    const before = store.readGrantWrites();
    write();
    assert.ok(store.readGrantWrites() > before, `${name} counts as ending grants`);
  }
});

Deno.test("durability 'grants': a login's commit is not synced, a revocation's is, at once", () => {
  using db = openTempStore({ durability: "grants" });
  const { store } = db;
  const { user, key } = seed(store); // new user, key and token: no sync
  assert.equal(store.readWalSyncs(), 0);
  store.transaction(() => {
    issueFor(store, { user, key }, "g".repeat(40), 2000);
    store.appendAudit({ at: 2000, actor: "test", action: "token.issued", subject: "token:2" });
  });
  assert.equal(store.readWalSyncs(), 0, "a login is not synced");
  const grant = store.findTokenGrant(hashSecret(TOKEN), hashSecret(KEY), 2000)!;
  store.transaction(() => {
    store.revokeToken(grant.tokenId, 2100);
    store.appendAudit({ at: 2100, actor: "test", action: "token.revoked", subject: "token:1" });
  });
  assert.equal(store.readWalSyncs(), 1, "a revocation is synced once, after its commit");
  store.setApiKeyDisabled(key.id, true, 2200); // autocommit
  assert.equal(store.readWalSyncs(), 2);
  const full = openStore(db.path);
  try {
    full.setUserDisabled(user.id, true, 2300);
    assert.equal(full.readWalSyncs(), 0, "durability 'full' leaves syncing to SQLite");
  } finally {
    full.close();
  }
});

/** Issues one more token (valid until 90,000) to the seeded user and key. */
function issueFor(
  store: Store,
  { user, key }: { user: { id: number }; key: { id: number } },
  token: string,
  issuedAt: number,
  maxLiveTokens = 100,
) {
  return store.issueToken({
    tokenHash: hashSecret(token),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt,
    expiresAt: 90_000,
    maxLiveTokens,
  });
}

Deno.test("durability 'grants' opens a database through a symbolic link", () => {
  const db = tempDbPath();
  openStore(db.path).close();
  const link = `${db.dir}/link.sqlite3`;
  Deno.symlinkSync(db.path, link);
  const store = openStore(link, { durability: "grants" });
  try {
    const { user } = seed(store);
    store.setUserDisabled(user.id, true, 3000);
    assert.equal(store.readWalSyncs(), 1);
  } finally {
    store.close();
    db.cleanup();
  }
});
