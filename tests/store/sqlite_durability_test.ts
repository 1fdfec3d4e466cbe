/**
 * The SQLite store's durability "grants": only writes that can end a grant wait for a sync
 * of the WAL, one that started after their commit and that concurrent commits share.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { hashSecret } from "../../src/auth/credentials.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openTempStore } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { issueFor, KEY, NO_AUDIT, seed, TOKEN } from "../_helpers/grant_seed.ts";
import { createHeldWalSync, hasSettled } from "../_helpers/held_wal_sync.ts";
import { StoreUnavailable } from "../../src/store/errors.ts";

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

/** A durability "grants" store whose WAL syncs wait for the test, seeded with one token. */
async function openHeldStore() {
  const held = createHeldWalSync();
  const db = openTempStore({ durability: "grants", runWalSync: held.runWalSync });
  const seeded = await seed(db.store);
  const grant = (await db.store.findTokenGrant({
    tokenHash: hashSecret(TOKEN),
    keyHash: hashSecret(KEY),
    now: 2000,
  }))!;
  return { db, held, ...seeded, tokenId: grant.tokenId };
}

/** Reads the token's revocation time through a connection of its own, as another process would. */
function readRevokedAt(path: string): number | null {
  const reader = new DatabaseSync(path, { readOnly: true });
  try {
    return (reader.prepare("SELECT revoked_at FROM tokens WHERE id = 1").get() as {
      revoked_at: number | null;
    }).revoked_at;
  } finally {
    reader.close();
  }
}

const REVOKE_AUDIT = { at: 2100, actor: "test", action: "token.revoked", subject: "token:1" };

Deno.test("durability 'grants': a revocation resolves only after its commit's sync, a login does not wait", async () => {
  const { db, held, user, key, tokenId } = await openHeldStore();
  using _ = db;
  const revoked = db.store.revokeToken(tokenId, { now: 2100, audit: REVOKE_AUDIT });
  await held.waitForSyncs(1);
  assert.equal(readRevokedAt(db.path), 2100, "committed (visible to other connections) first");
  assert.equal(await hasSettled(revoked), false, "not answered before the sync");
  // A login during the sync neither waits for it nor asks for one.
  await issueFor(db.store, { user, key }, "h".repeat(40), 2150);
  assert.equal(held.syncs.length, 1);
  await held.syncs[0].release();
  await revoked;
  assert.equal(db.sqlite.readWalSyncs(), 1);
});

Deno.test("durability 'grants': a login that revokes its user's oldest token beyond the cap waits for its sync", async () => {
  const { db, held, user, key } = await openHeldStore();
  using _ = db;
  // The seeded user holds one live token: a cap of 1 makes this login revoke it.
  const login = issueFor(db.store, { user, key }, "c".repeat(40), 2100, 1);
  await held.waitForSyncs(1);
  assert.equal(readRevokedAt(db.path), 2100, "the oldest token revoked, committed");
  assert.equal(await hasSettled(login), false, "not answered before the sync");
  await held.syncs[0].release();
  await login;
  assert.equal(db.sqlite.readWalSyncs(), 1);
});

Deno.test("durability 'grants': grant-ending writes committed during a sync share the next one", async () => {
  const { db, held, user, key, tokenId } = await openHeldStore();
  using _ = db;
  const writesBefore = db.sqlite.readGrantWrites();
  const first = db.store.revokeToken(tokenId, { now: 2100, audit: REVOKE_AUDIT });
  await held.waitForSyncs(1);
  const second = db.store.updateApiKeyDisabled(key.id, { disabled: true, now: 2200, ...NO_AUDIT });
  const third = db.store.updateUserDisabled(user.id, { disabled: true, now: 2300, ...NO_AUDIT });
  await held.syncs[0].release();
  await first;
  await held.waitForSyncs(2);
  assert.equal(await hasSettled(second), false, "the first sync may have started before it");
  assert.equal(await hasSettled(third), false);
  await held.syncs[1].release();
  await Promise.all([second, third]);
  assert.ok(db.sqlite.readGrantWrites() - writesBefore >= 3, "each ended a grant");
  assert.equal(db.sqlite.readWalSyncs(), 2, "three grant writes, two syncs");
});

Deno.test("durability 'grants': a repeated revocation that changes nothing waits for the sync of the first", async () => {
  const { db, held, user, key, tokenId } = await openHeldStore();
  using _ = db;
  const writesBefore = db.sqlite.readGrantWrites();
  const first = db.store.revokeToken(tokenId, { now: 2100, audit: REVOKE_AUDIT });
  await held.waitForSyncs(1);
  // A client retrying after a timeout, while the first commit's sync still runs.
  const again = db.store.revokeToken(tokenId, { now: 2110, audit: REVOKE_AUDIT });
  // Through another store on the same file, as another --workers worker would.
  const other = openSqliteStore(db.path, { durability: "grants", runWalSync: held.runWalSync });
  try {
    const otherAgain = other.revokeToken(tokenId, { now: 2120, audit: REVOKE_AUDIT });
    // The other store syncs at once (its own group); this store's repeat queues for the next.
    await held.waitForSyncs(2);
    assert.equal(await hasSettled(again), false, "not answered before a sync after the first");
    assert.equal(await hasSettled(otherAgain), false);
    await held.syncs[1].release();
    await otherAgain;
    await held.syncs[0].release();
    await first;
    await held.waitForSyncs(3);
    assert.equal(await hasSettled(again), false, "the running sync may predate its commit");
    await held.syncs[2].release();
    await again;
    assert.equal(readRevokedAt(db.path), 2100, "the repeats changed no row");
    assert.equal(db.sqlite.readGrantWrites() - writesBefore, 1, "a repeat evicts nothing");
    assert.equal(other.sqlite.readGrantWrites(), 0);
    // Disabling a user that is disabled already waits for a sync too.
    await Promise.all([
      db.store.updateUserDisabled(user.id, { disabled: true, now: 2200, ...NO_AUDIT }),
      held.waitForSyncs(4).then(() => held.syncs[3].release()),
    ]);
    const twice = db.store.updateUserDisabled(user.id, { disabled: true, now: 2300, ...NO_AUDIT });
    await held.waitForSyncs(5);
    assert.equal(await hasSettled(twice), false);
    await held.syncs[4].release();
    await twice;
    // A login runs no grant-ending statement: it still does not wait.
    await issueFor(db.store, { user, key }, "h".repeat(40), 2400);
    assert.equal(held.syncs.length, 5);
  } finally {
    await other.closeStore();
  }
});

Deno.test("durability 'grants': a failed sync is fatal for the store: its writes and every later one fail, readiness reports it", async () => {
  const { db, held, user, key, tokenId } = await openHeldStore();
  using _ = db;
  assert.equal(await db.store.findWriteFailure(), undefined);
  const revoked = db.store.revokeToken(tokenId, { now: 2100, audit: REVOKE_AUDIT });
  await held.waitForSyncs(1);
  held.syncs[0].fail(new Error("Input/output error (os error 5)"));
  const expected = "The database is unavailable: a sync of its write-ahead log failed " +
    "(restart keygate): Input/output error (os error 5)";
  await assert.rejects(revoked, { name: "StoreUnavailable", message: expected });
  assert.equal(readRevokedAt(db.path), 2100, "the commit stays: only its durability is unknown");
  const tokensBefore = countRows(db.path, "tokens");
  // Every later write fails before it writes, even one that ends no grant; no sync is tried.
  await assert.rejects(
    issueFor(db.store, { user, key }, "h".repeat(40), 2150),
    { name: "StoreUnavailable", message: expected },
  );
  await assert.rejects(
    db.store.revokeToken(tokenId, { now: 2160, audit: REVOKE_AUDIT }),
    StoreUnavailable,
  );
  assert.equal(countRows(db.path, "tokens"), tokensBefore, "the refused login wrote nothing");
  assert.equal(held.syncs.length, 1);
  assert.equal(await db.store.findWriteFailure(), "Input/output error (os error 5)");
  assert.equal(
    await db.store.findWriteFailure(),
    "Input/output error (os error 5)",
    "the readiness probe does not clear it",
  );
  // Reads still answer (the gate refuses the revoked token from the committed row).
  assert.equal(
    await db.store.findTokenGrant({
      tokenHash: hashSecret(TOKEN),
      keyHash: hashSecret(KEY),
      now: 2200,
    }),
    undefined,
  );
});

/** Rows of `table`, read through a connection of its own. */
function countRows(path: string, table: "tokens"): number {
  const reader = new DatabaseSync(path, { readOnly: true });
  try {
    return Number((reader.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n);
  } finally {
    reader.close();
  }
}

Deno.test("durability 'grants': an audit search is a read, neither a grant write nor a sync", async () => {
  using db = openTempStore({ durability: "grants" });
  for (const [at, action] of [[1000, "user.added"], [1100, "key.created"]] as const) {
    await db.store.appendAudit({ at, actor: "operator:ann", action, subject: "user:a@b.org" });
  }
  const writes = db.sqlite.readGrantWrites();
  // Both statement shapes: a page, and one with a filter whose scan may stop (its query has a WITH).
  const all = await db.store.searchAuditPage({ limit: 10 });
  const filtered = await db.store.searchAuditPage({
    limit: 1,
    actor: "operator:ann",
    action: "key.created",
  });
  assert.deepEqual(all.entries.map((entry) => entry.action), ["key.created", "user.added"]);
  assert.deepEqual(filtered.entries.map((entry) => entry.at), [1100]);
  assert.equal(db.sqlite.readGrantWrites(), writes);
  assert.equal(db.sqlite.readWalSyncs(), 0);
});

Deno.test("durability 'grants': a janitor batch that deletes nothing waits for no sync, one that deletes does", async () => {
  using db = openTempStore({ durability: "grants" });
  const { store, sqlite } = db;
  await seed(store); // its token expires at 90,000
  const writes = sqlite.readGrantWrites();
  assert.equal(await store.deleteEndedTokens({ size: 500, cutoff: 89_999 }), 0);
  assert.equal(sqlite.readWalSyncs(), 0, "a sweep that finds nothing syncs nothing");
  assert.equal(sqlite.readGrantWrites(), writes, "and ends no grant");
  assert.equal(await store.deleteEndedTokens({ size: 500, cutoff: 90_000 }), 1);
  assert.equal(sqlite.readWalSyncs(), 1, "a deletion is synced, as any grant write");
  assert.equal(sqlite.readGrantWrites(), writes + 1);
});
