/**
 * SqliteStore.sqlite.runBulkTransaction(): the bench's seeding and bulk loads call the store
 * inside one transaction; every write joins it, it commits once (a grant write among them moving
 * the change feed and waiting for a WAL sync, as one write would), and a rejection rolls back
 * everything.
 *
 * @module
 */
import assert from "node:assert/strict";
import { openSqliteStore, type SqliteStore } from "../../../src/store/sqlite/sqlite_store.ts";
import { openConnection } from "../../../src/store/sqlite/connection.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";

const NOW = 1_800_000_000_000;

async function seedUser(store: SqliteStore, n: number) {
  const user = await store.insertUser(
    { email: `bulk${n}@example.org`, passwordHash: "x", tokenTimeoutSeconds: null },
    { now: NOW, audit: undefined },
  );
  const key = await store.insertApiKey(
    { userId: user.id, keyHash: new Uint8Array(32).fill(n), prefix: `p${n}`, label: "" },
    { now: NOW, audit: undefined },
  );
  const tokenId = await store.insertToken({
    tokenHash: new Uint8Array(32).fill(100 + n),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: NOW,
    expiresAt: NOW + 86_400_000,
    maxLiveTokens: 10,
  }, { audit: undefined });
  return { user, key, tokenId };
}

Deno.test("runBulkTransaction() commits the store calls made inside it once, grant writes and all", async () => {
  using db = tempDbPath();
  const store = openSqliteStore(db.path, { durability: "grants" });
  try {
    const epochBefore = store.readGrantEpoch();
    const syncsBefore = store.sqlite.readWalSyncs();
    const seeded = await store.sqlite.runBulkTransaction(async () => {
      const first = await seedUser(store, 1);
      const second = await seedUser(store, 2);
      assert.equal(
        await store.revokeToken(first.tokenId, { now: NOW + 1, audit: undefined }),
        true,
      );
      return [first, second];
    });
    assert.equal(seeded.length, 2);
    assert.deepEqual((await store.listUsers()).map((user) => user.email).sort(), [
      "bulk1@example.org",
      "bulk2@example.org",
    ]);
    const revoked = await store.findTokenStatus(new Uint8Array(32).fill(101), NOW + 2);
    assert.equal(revoked?.live, false);
    const live = await store.findTokenStatus(new Uint8Array(32).fill(102), NOW + 2);
    assert.equal(live?.live, true);
    // The revocation inside moved the change feed and was synced once, after the commit.
    assert.notDeepEqual(store.readGrantEpoch(), epochBefore);
    assert.equal(store.sqlite.readWalSyncs(), syncsBefore + 1);
    // A write after it commits on its own again.
    await seedUser(store, 3);
    assert.equal((await store.listUsers()).length, 3);
  } finally {
    await store.closeStore();
  }
});

Deno.test("runBulkTransaction() rolls back every store call made inside it when it rejects", async () => {
  using db = tempDbPath();
  const store = openSqliteStore(db.path);
  try {
    await seedUser(store, 1);
    await assert.rejects(
      store.sqlite.runBulkTransaction(async () => {
        await seedUser(store, 2);
        await seedUser(store, 3);
        throw new Error("the load failed half way");
      }),
      /the load failed half way/,
    );
    assert.deepEqual((await store.listUsers()).map((user) => user.email), ["bulk1@example.org"]);
    assert.equal(await store.findTokenStatus(new Uint8Array(32).fill(102), NOW), undefined);
    // Nested bulk transactions are refused rather than silently joined.
    await store.sqlite.runBulkTransaction(async () => {
      await assert.rejects(
        store.sqlite.runBulkTransaction(() => Promise.resolve()),
        /A transaction is open already/,
      );
      await seedUser(store, 4);
    });
    assert.equal((await store.listUsers()).length, 2);
  } finally {
    await store.closeStore();
  }
});

Deno.test("a write that fails inside runBulk() leaves nothing, and the others of the bulk commit", async () => {
  using db = tempDbPath();
  const conn = openConnection(db.path);
  try {
    conn.db.exec("CREATE TABLE scratch (n INTEGER NOT NULL)");
    const insert = conn.sql("INSERT INTO scratch (n) VALUES (:n)", "keeps-grants");
    await conn.runBulk(async () => {
      await conn.write(() => insert.run({ n: 1 }));
      await assert.rejects(
        conn.write(() => {
          insert.run({ n: 2 });
          throw new Error("the write failed after its first row");
        }),
        /the write failed after its first row/,
      );
      await conn.write(() => insert.run({ n: 3 }));
    });
    const rows = conn.db.prepare("SELECT n FROM scratch ORDER BY n").all() as { n: number }[];
    assert.deepEqual(rows.map((row) => row.n), [1, 3]);
  } finally {
    conn.close();
  }
});
