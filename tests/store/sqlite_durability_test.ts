/**
 * The SQLite store's durability "grants": only commits that can end a grant are synced
 * before they return.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openTempStore } from "../_helpers/store.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { KEY, NO_AUDIT, seed, TOKEN } from "../_helpers/grant_seed.ts";

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
