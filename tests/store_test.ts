import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { MIGRATIONS } from "../src/store/sqlite/migrations.ts";
import { hashSecret } from "../src/auth/credentials.ts";
import { migrate, openStore } from "../src/store/sqlite/store.ts";
import { tempDbPath } from "./_helpers.ts";

/** A store on a temporary file with one user and one key; disposing closes and removes it. */
function seeded() {
  const db = tempDbPath();
  const seed = seedStore(db.path);
  return {
    ...seed,
    [Symbol.dispose]() {
      seed.store.close();
      db.cleanup();
    },
  };
}

function seedStore(path: string) {
  const store = openStore(path);
  const user = store.insertUser({
    email: "a@b.org",
    passwordHash: "$argon2id$x",
    tokenTimeoutSeconds: null,
  }, 1000);
  const key = store.insertApiKey({
    userId: user.id,
    keyHash: hashSecret("k1"),
    prefix: "k1",
    label: "",
  }, 1000);
  return { store, user, key };
}

Deno.test("openStore() applies every migration once and sets the pragmas", () => {
  const db = tempDbPath();
  try {
    openStore(db.path).close();
    openStore(db.path).close(); // idempotent
    const raw = new DatabaseSync(db.path);
    assert.equal(
      (raw.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
      MIGRATIONS.at(-1)!.version,
    );
    assert.equal(
      (raw.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode,
      "wal",
    );
    const tables = raw.prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table'")
      .all() as { name: string; sql: string }[];
    for (const table of ["users", "api_keys", "tokens"]) {
      const found = tables.find((t) => t.name === table);
      assert.ok(found, table);
      assert.match(found.sql, /STRICT$/, table);
    }
    raw.close();
  } finally {
    db.cleanup();
  }
});

Deno.test("openStore() enforces foreign keys and lower-case e-mails", () => {
  using fixture = seeded();
  const { store } = fixture;
  assert.throws(
    () =>
      store.issueToken({
        tokenHash: hashSecret("t"),
        userId: 99,
        apiKeyId: 99,
        issuedAt: 1,
        expiresAt: 2,
        maxLiveTokens: 10,
      }),
    /FOREIGN KEY/,
  );
  assert.throws(
    () =>
      store.insertUser({ email: "Upper@b.org", passwordHash: "x", tokenTimeoutSeconds: null }, 1),
    /CHECK/,
  );
  assert.equal(store.countRows("tokens"), 0);
});

Deno.test("findTokenGrant() finds a live token only with its own key", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  store.issueToken({
    tokenHash: hashSecret("t1"),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: 1000,
    expiresAt: 5000,
    maxLiveTokens: 10,
  });
  const grant = store.findTokenGrant(hashSecret("t1"), hashSecret("k1"), 1500);
  assert.deepEqual({ ...grant, tokenId: 0 }, {
    tokenId: 0,
    userId: user.id,
    email: "a@b.org",
    apiKeyId: key.id,
    issuedAt: 1000,
    expiresAt: 5000,
    keyExpiresAt: null,
  });
  assert.equal(store.findTokenGrant(hashSecret("t1"), hashSecret("k2"), 1500), undefined);
  assert.equal(store.findTokenGrant(hashSecret("t2"), hashSecret("k1"), 1500), undefined);
});

Deno.test("findTokenGrant() misses tokens of revoked keys, disabled users and revoked tokens", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  const issue = (t: string, issuedAt = 1000) =>
    store.issueToken({
      tokenHash: hashSecret(t),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt,
      expiresAt: 9000,
      maxLiveTokens: 10,
    });
  issue("t1");
  issue("t2");
  const t1 = store.findTokenGrant(hashSecret("t1"), hashSecret("k1"), 1500)!;
  assert.equal(store.revokeToken(t1.tokenId, 2000), true);
  assert.equal(store.findTokenGrant(hashSecret("t1"), hashSecret("k1"), 1500), undefined);
  assert.ok(store.findTokenGrant(hashSecret("t2"), hashSecret("k1"), 1500));

  assert.equal(store.setUserDisabled(user.id, true, 2000), 1);
  assert.equal(store.findTokenGrant(hashSecret("t2"), hashSecret("k1"), 1500), undefined);
  store.setUserDisabled(user.id, false, 2000);
  issue("t3", 2500); // after the cutoff the disable set
  assert.ok(store.findTokenGrant(hashSecret("t3"), hashSecret("k1"), 2600));
  assert.equal(store.revokeApiKey(key.id, 3000), 1);
  assert.equal(store.findTokenGrant(hashSecret("t3"), hashSecret("k1"), 1500), undefined);
});

Deno.test("issueToken() keeps at most maxLiveTokens per user and key, revoking the oldest", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  for (let i = 0; i < 5; i++) {
    store.issueToken({
      tokenHash: hashSecret(`t${i}`),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: 1000 + i,
      expiresAt: 9000,
      maxLiveTokens: 3,
    });
  }
  const live = [0, 1, 2, 3, 4].filter((i) =>
    store.findTokenGrant(hashSecret(`t${i}`), hashSecret("k1"), 1500)
  );
  assert.deepEqual(live, [2, 3, 4]);
});

Deno.test("purgeTokens() deletes expired and revoked rows only", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  const issue = (t: string, expiresAt: number) =>
    store.issueToken({
      tokenHash: hashSecret(t),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: 1000,
      expiresAt,
      maxLiveTokens: 10,
    });
  issue("expired", 2000);
  issue("live", 9000);
  issue("revoked", 9000);
  store.revokeToken(
    store.findTokenGrant(hashSecret("revoked"), hashSecret("k1"), 1500)!.tokenId,
    1500,
  );
  assert.equal(store.purgeTokens(3000), 2);
  assert.equal(store.countRows("tokens"), 1);
  assert.ok(store.findTokenGrant(hashSecret("live"), hashSecret("k1"), 1500));
});

Deno.test("transaction() rolls back every write when its function throws", () => {
  using fixture = seeded();
  const { store } = fixture;
  assert.throws(() =>
    store.transaction(() => {
      store.insertUser({ email: "c@d.org", passwordHash: "x", tokenTimeoutSeconds: null }, 1);
      throw new Error("boom");
    }), /boom/);
  assert.equal(store.findUserByEmail("c@d.org"), undefined);
  assert.equal(store.countRows("users"), 1);
});

Deno.test("rotateApiKey() refuses a key rotated meanwhile and rolls the successor back", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  const successor = (name: string) => ({
    userId: user.id,
    keyHash: hashSecret(name),
    prefix: name,
    label: "",
    expiresAt: null,
  });
  const second = store.rotateApiKey(key.id, successor("k2"), {
    oldKeyExpiresAt: 5000,
    now: 2000,
  });
  assert.deepEqual(
    [store.findApiKeyById(key.id)!.replacedBy, store.findApiKeyById(key.id)!.expiresAt],
    [second.id, 5000],
  );
  assert.throws(
    () => store.rotateApiKey(key.id, successor("k3"), { oldKeyExpiresAt: 9000, now: 2000 }),
    /rotated or revoked meanwhile/,
  );
  assert.equal(store.findApiKeyByHash(hashSecret("k3")), undefined);
  assert.equal(store.findApiKeyById(key.id)!.expiresAt, 5000);
  assert.equal(store.countRows("api_keys"), 2);
});

Deno.test("migration 3 upgrades a version-1 database and keeps its rows working", () => {
  const db = tempDbPath();
  try {
    const raw = new DatabaseSync(db.path);
    migrate(raw, MIGRATIONS.filter((m) => m.version === 1));
    raw.prepare(
      `INSERT INTO users (email, password_hash, created_at, updated_at)
       VALUES ('a@b.org', 'x', 1, 1)`,
    ).run();
    raw.prepare(
      `INSERT INTO api_keys (key_hash, prefix, user_id, created_at) VALUES (:h, 'k1', 1, 1)`,
    ).run({ h: hashSecret("k1") });
    raw.prepare(
      `INSERT INTO tokens (token_hash, user_id, api_key_id, issued_at, expires_at)
       VALUES (:h, 1, 1, 1000, 9000)`,
    ).run({ h: hashSecret("t1") });
    raw.close();
    const store = openStore(db.path);
    const key = store.findApiKeyById(1)!;
    assert.deepEqual(
      [key.expiresAt, key.disabledAt, key.replacedBy, key.lastUsedAt, key.useCount],
      [null, null, null, null, 0],
    );
    assert.equal(store.findUserByEmail("a@b.org")!.tokensValidFrom, 0);
    assert.ok(store.findTokenGrant(hashSecret("t1"), hashSecret("k1"), 2000));
    assert.deepEqual(store.listAudit(), []);
    store.close();
  } finally {
    db.cleanup();
  }
});

Deno.test("store.findKeyHolder() finds a live key of an enabled user only", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  assert.deepEqual(store.findKeyHolder(hashSecret("k1"), 2000), {
    apiKeyId: key.id,
    userId: user.id,
    email: "a@b.org",
    introspect: false,
  });
  assert.equal(store.findKeyHolder(hashSecret("nope"), 2000), undefined);
  store.setUserDisabled(user.id, true, 2000);
  assert.equal(store.findKeyHolder(hashSecret("k1"), 2000), undefined);
  store.setUserDisabled(user.id, false, 2000);
  store.revokeApiKey(key.id, 3000);
  assert.equal(store.findKeyHolder(hashSecret("k1"), 2000), undefined);
});

Deno.test("store.findTokenStatus() and revokeTokenOfKey() see tokens in every state", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  const other = store.insertApiKey(
    { userId: user.id, keyHash: hashSecret("k2"), prefix: "k2", label: "", introspect: true },
    1000,
  );
  assert.equal(other.introspect, true);
  assert.equal(key.introspect, false);
  store.issueToken({
    tokenHash: hashSecret("t1"),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: 1000,
    expiresAt: 5000,
    maxLiveTokens: 100,
  });
  const status = store.findTokenStatus(hashSecret("t1"), 2000)!;
  assert.deepEqual({ ...status, tokenId: 0 }, {
    tokenId: 0,
    userId: user.id,
    email: "a@b.org",
    apiKeyId: key.id,
    issuedAt: 1000,
    expiresAt: 5000,
    live: true,
  });
  assert.equal(store.findTokenStatus(hashSecret("t2"), 2000), undefined);
  // Only the key it was issued with can revoke it, and only once.
  assert.equal(store.revokeTokenOfKey(hashSecret("t1"), other.id, 2000), undefined);
  assert.equal(store.findTokenStatus(hashSecret("t1"), 2000)!.live, true);
  const tokenId = store.findTokenStatus(hashSecret("t1"), 2000)!.tokenId;
  assert.equal(store.revokeTokenOfKey(hashSecret("t1"), key.id, 2000), tokenId);
  assert.equal(store.revokeTokenOfKey(hashSecret("t1"), key.id, 2000), undefined);
  assert.equal(store.findTokenStatus(hashSecret("t1"), 2000)!.live, false);
});

Deno.test("findKeyHolder() and findTokenStatus() apply key expiry, disabling and the token cutoff", () => {
  using fixture = seeded();
  const { store, user, key } = fixture;
  store.issueToken({
    tokenHash: hashSecret("t1"),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: 1000,
    expiresAt: 90_000,
    maxLiveTokens: 100,
  });
  assert.ok(store.findKeyHolder(hashSecret("k1"), 2000));
  assert.equal(store.findTokenStatus(hashSecret("t1"), 2000)!.live, true);

  store.setApiKeyDisabled(key.id, true, 2000);
  assert.equal(store.findKeyHolder(hashSecret("k1"), 2000), undefined);
  assert.equal(store.findTokenStatus(hashSecret("t1"), 2000)!.live, false);
  store.setApiKeyDisabled(key.id, false, 2000);
  assert.equal(store.findTokenStatus(hashSecret("t1"), 2000)!.live, true);

  const expiring = store.insertApiKey(
    { userId: user.id, keyHash: hashSecret("k2"), prefix: "k2", label: "", expiresAt: 5000 },
    1000,
  );
  assert.ok(store.findKeyHolder(hashSecret("k2"), 4999));
  assert.equal(store.findKeyHolder(hashSecret("k2"), 5000), undefined);
  store.issueToken({
    tokenHash: hashSecret("t2"),
    userId: user.id,
    apiKeyId: expiring.id,
    issuedAt: 1000,
    expiresAt: 90_000,
    maxLiveTokens: 100,
  });
  assert.equal(store.findTokenStatus(hashSecret("t2"), 4000)!.expiresAt, 5000);
  assert.equal(store.findTokenStatus(hashSecret("t2"), 5000)!.live, false);

  store.revokeTokensOfUser(user.id, 3000);
  assert.equal(store.findTokenStatus(hashSecret("t1"), 3000)!.live, false);
});

Deno.test("findUserById() finds a user by id, or undefined", () => {
  using fixture = seeded();
  const { store, user } = fixture;
  assert.deepEqual(store.findUserById(user.id), user);
  assert.equal(store.findUserById(user.id + 1), undefined);
});

Deno.test("migrate() needs versions 1..n in order and refuses a database from a newer keygate", () => {
  const db = new DatabaseSync(":memory:");
  try {
    assert.deepEqual(MIGRATIONS.map((m) => m.version), MIGRATIONS.map((_, i) => i + 1));
    assert.throws(
      () => migrate(db, [{ version: 2, name: "gap", sql: "" }]),
      /Migration gap is numbered 2, not 1/,
    );
    db.exec(`PRAGMA user_version = ${MIGRATIONS.length + 1}`);
    assert.throws(() => migrate(db, MIGRATIONS), /newer than this keygate knows/);
  } finally {
    db.close();
  }
});
