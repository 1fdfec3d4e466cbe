/**
 * The one "usable key / live token" rule (store.ts KEY_USABLE, TOKEN_VALID,
 * TOKEN_LIVE, TOKEN_ENDED_AT) as every statement applies it. Each state is
 * set alone with raw SQL on the database file, so that no store function's
 * side effect (a revoked key revoking its tokens, a disabled user's cutoff)
 * can hide a statement that forgot a condition.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { hashSecret } from "../src/auth/credentials.ts";
import { openStore, type Store } from "../src/store/sqlite/store.ts";
import { tempDbPath } from "./_helpers.ts";

const T0 = 1_000_000;
const HOUR = 3600_000;

/** One user, one key, one token issued at T0 that expires at T0 + 1 h. */
function setup() {
  const db = tempDbPath();
  const store = openStore(db.path);
  const user = store.insertUser(
    { email: "a@b.org", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    T0,
  );
  const key = store.insertApiKey(
    { userId: user.id, keyHash: hashSecret("k1"), prefix: "k1", label: "" },
    T0,
  );
  const tokenId = store.issueToken({
    tokenHash: hashSecret("t1"),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: T0,
    expiresAt: T0 + HOUR,
    maxLiveTokens: 10,
  });
  const raw = new DatabaseSync(db.path);
  return {
    store,
    tokenId,
    /** Runs one statement on another connection, as an operator's `sqlite3` would. */
    exec: (sql: string) => raw.exec(sql),
    [Symbol.dispose]() {
      raw.close();
      store.close();
      db.cleanup();
    },
  };
}

function isGranted(store: Store, now: number): boolean {
  return store.findTokenGrant(hashSecret("t1"), hashSecret("k1"), now) !== undefined;
}

/** Each state alone: grant refused, status not live, not counted as live, key holder refused. */
const ALONE: [string, string, { keyRefused: boolean }][] = [
  ["key revoked", `UPDATE api_keys SET revoked_at = ${T0 + 10}`, { keyRefused: true }],
  ["key disabled", `UPDATE api_keys SET disabled_at = ${T0 + 10}`, { keyRefused: true }],
  ["key expired", `UPDATE api_keys SET expires_at = ${T0 + 10}`, { keyRefused: true }],
  ["user disabled", "UPDATE users SET disabled = 1", { keyRefused: true }],
  ["user cutoff", `UPDATE users SET tokens_valid_from = ${T0 + 1}`, { keyRefused: false }],
  ["token revoked", `UPDATE tokens SET revoked_at = ${T0 + 10}`, { keyRefused: false }],
];

for (const [name, sql, { keyRefused }] of ALONE) {
  Deno.test(`store: ${name} alone ends the token for the grant, status, live count and gate`, () => {
    using db = setup();
    const now = T0 + 20;
    assert.ok(isGranted(db.store, now));
    assert.equal(db.store.findTokenStatus(hashSecret("t1"), now)!.live, true);
    assert.equal(db.store.countLiveTokens(now), 1);
    db.exec(sql);
    assert.equal(isGranted(db.store, now), false);
    const status = db.store.findTokenStatus(hashSecret("t1"), now)!;
    assert.equal(status.tokenId, db.tokenId);
    assert.equal(status.live, false);
    assert.equal(db.store.countLiveTokens(now), 0);
    assert.equal(db.store.findKeyHolder(hashSecret("k1"), now) === undefined, keyRefused);
  });
}

Deno.test("store: an expired token is counted live until its expiry, not after", () => {
  using db = setup();
  assert.equal(db.store.countLiveTokens(T0 + HOUR - 1), 1);
  assert.equal(db.store.countLiveTokens(T0 + HOUR), 0);
});

/** How each state ends a token for the purge: the instant retention counts from. */
const ENDED: [string, string, number][] = [
  ["key revoked", `UPDATE api_keys SET revoked_at = ${T0 + 10}`, T0 + 10],
  ["key expired", `UPDATE api_keys SET expires_at = ${T0 + 10}`, T0 + 10],
  [
    "user cutoff",
    `UPDATE users SET tokens_valid_from = ${T0 + 1}, updated_at = ${T0 + 10}`,
    T0 + 10,
  ],
  ["token revoked", `UPDATE tokens SET revoked_at = ${T0 + 10}`, T0 + 10],
  ["token expiry", "SELECT 1", T0 + HOUR],
];

for (const [name, sql, endedAt] of ENDED) {
  Deno.test(`store: purgeTokenRange() deletes a token ended by ${name} once retention has passed`, () => {
    using db = setup();
    db.exec(sql);
    // The janitor's cutoff is now - retention: the row stays until its end is that old.
    assert.equal(db.store.purgeTokenRange(0, 10, endedAt - 1), 0);
    assert.equal(db.store.countRows("tokens"), 1);
    assert.equal(db.store.purgeTokenRange(0, 10, endedAt), 1);
    assert.equal(db.store.countRows("tokens"), 0);
  });
}

for (const sql of ["UPDATE api_keys SET disabled_at = 1", "UPDATE users SET disabled = 1"]) {
  Deno.test(`store: purge keeps tokens a re-enable would revive (${sql})`, () => {
    using db = setup();
    db.exec(sql);
    assert.equal(db.store.purgeTokenRange(0, 10, T0 + HOUR - 1), 0);
    assert.equal(db.store.purgeTokens(T0 + HOUR - 1), 0);
    assert.equal(db.store.countRows("tokens"), 1);
    db.exec(sql.replace("= 1", sql.includes("disabled_at") ? "= NULL" : "= 0"));
    assert.ok(isGranted(db.store, T0 + HOUR - 1));
  });
}

Deno.test("store: purgeTokens() (token purge) deletes ended rows across id windows", () => {
  using db = setup();
  for (let i = 2; i <= 7; i++) {
    db.store.issueToken({
      tokenHash: hashSecret(`t${i}`),
      userId: 1,
      apiKeyId: 1,
      issuedAt: T0 + i,
      expiresAt: i % 2 === 0 ? T0 + 5 * HOUR : T0 + HOUR / 2,
      maxLiveTokens: 10,
    });
  }
  const before = db.store.countChanges();
  // t1 and the odd ones expired; at T0 + 2 h, 4 of 7 rows ended. Windows of 2 ids: 4 of them.
  assert.equal(db.store.purgeTokens(T0 + 2 * HOUR, 2), 4);
  assert.equal(db.store.countChanges() - before, 4);
  assert.equal(db.store.countRows("tokens"), 3);
  assert.equal(db.store.countLiveTokens(T0 + 2 * HOUR), 3);
  db.exec(`UPDATE api_keys SET revoked_at = ${T0 + 2 * HOUR}`);
  assert.equal(db.store.purgeTokens(T0 + 2 * HOUR), 3);
  assert.equal(db.store.countRows("tokens"), 0);
});
