/**
 * A new portal session, and a new API key without a per-user cap, hold their user against its
 * deletion (`holdUser`) instead of locking it (`lockUser`) on PostgreSQL: two of one user made at
 * once do not wait for each other, while a deletion still waits for one, then deletes what it
 * wrote, and one that waits on a deletion is still refused. The first writer is held open by
 * a transaction that inserts the same digest and rolls back when the test says: never by timing.
 *
 * @module
 */
import assert from "node:assert/strict";
import type postgres from "postgres";
import { hashSecret } from "../../src/auth/credentials.ts";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { completesUnblocked, settle, untilWaiting } from "../_helpers/lock_waits.ts";
import { anonymizing, HOUR, NO_AUDIT, T0 } from "./_contract_fixtures.ts";

const cluster = await startTestCluster();

/** A fresh store on its own database, a second client to hold rows with, and two users. */
async function withUsers(
  name: string,
  fn: (
    context: { store: Store; sql: postgres.Sql; userId: number; otherId: number },
  ) => Promise<void>,
) {
  const url = await cluster!.createDatabase(name);
  const store = await openPostgresStore(url);
  const sql = openPostgresClient(parseStoreUrl(url) as PostgresLocation, { max: 2 });
  try {
    const [userId, otherId] = await Promise.all(["ann@example.org", "bob@example.org"].map(
      async (email) =>
        (await store.insertUser(
          { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
          { now: T0, ...NO_AUDIT },
        )).id,
    ));
    await fn({ store, sql, userId, otherId });
  } finally {
    // A failed wait leaves the holding transaction open: end it rather than wait for it.
    await sql.end({ timeout: 1 });
    await store.closeStore();
  }
}

/**
 * Runs `write` in a transaction that rolls back on `release()`: a writer that inserts a row
 * with the same unique digest waits there (after the locks it took before) until then.
 */
async function holdUncommitted(sql: postgres.Sql, write: (tx: postgres.TransactionSql) => unknown) {
  const written = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  const holding = sql.begin(async (tx) => {
    await write(tx);
    written.resolve();
    await release.promise;
    throw new Error("rolled back");
  }).catch(() => {});
  await written.promise;
  return async () => {
    release.resolve();
    await holding;
  };
}

function session(store: Store, idHash: Uint8Array, userId: number) {
  return store.insertPortalSession(idHash, {
    now: T0 + 1,
    userId,
    expiresAt: T0 + HOUR,
    ...NO_AUDIT,
  });
}

function apiKey(store: Store, name: string, userId: number) {
  return store.insertApiKey(
    { userId, keyHash: hashSecret(name), prefix: name, label: "" },
    { now: T0 + 1, ...NO_AUDIT },
  );
}

function deleteUser(store: Store, userId: number) {
  return store.deleteUser(userId, { now: T0 + 2, ...anonymizing(userId), ...NO_AUDIT });
}

/** Holds a session insert of `userId` open after its user lock: another user's, same digest. */
async function holdSession(sql: postgres.Sql, idHash: Uint8Array, otherId: number) {
  return await holdUncommitted(
    sql,
    (tx) =>
      tx`INSERT INTO portal_sessions (id_hash, user_id, created_at, expires_at)
      VALUES (${idHash}, ${otherId}, ${T0}, ${T0 + HOUR})`,
  );
}

/** Holds a key insert open after its user lock: another user's key, same digest. */
async function holdKey(sql: postgres.Sql, name: string, otherId: number) {
  return await holdUncommitted(
    sql,
    (tx) =>
      tx`INSERT INTO api_keys (key_hash, prefix, user_id, label, introspect, created_at)
      VALUES (${hashSecret(name)}, ${name}, ${otherId}, '', 0, ${T0})`,
  );
}

const RACE = { ignore: cluster === undefined, sanitizeResources: false, sanitizeOps: false };

Deno.test({
  ...RACE,
  name: "insertPortalSession(): a user's second session does not wait for its first",
  async fn() {
    await withUsers("hold_sessions", async ({ store, sql, userId, otherId }) => {
      const first = hashSecret("first-session");
      const release = await holdSession(sql, first, otherId);
      const inserting = settle(session(store, first, userId));
      await untilWaiting(sql, 1); // the first holds its user, waits for the digest
      const second = hashSecret("second-session");
      await completesUnblocked(sql, session(store, second, userId), 1);
      assert.equal((await store.findPortalSessionUser(second, T0 + 2))?.user.id, userId);
      await release();
      assert.deepEqual(await inserting, { value: undefined });
      assert.equal((await store.findPortalSessionUser(first, T0 + 2))?.user.id, userId);
    });
  },
});

Deno.test({
  ...RACE,
  name: "insertPortalSession() holding the user: a deletion waits, then deletes the session",
  async fn() {
    await withUsers("hold_session_delete", async ({ store, sql, userId, otherId }) => {
      const idHash = hashSecret("held-session");
      const release = await holdSession(sql, idHash, otherId);
      const inserting = settle(session(store, idHash, userId));
      await untilWaiting(sql, 1);
      const deleting = settle(deleteUser(store, userId));
      await untilWaiting(sql, 2); // the deletion waits for the session's hold on the user
      await release();
      assert.deepEqual(await inserting, { value: undefined });
      const deleted = await deleting;
      assert.ok("value" in deleted, `the deletion failed: ${"error" in deleted && deleted.error}`);
      assert.equal(await store.findUserById(userId), undefined);
      assert.equal(await store.findPortalSessionUser(idHash, T0 + 2), undefined);
      const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM portal_sessions
        WHERE user_id = ${userId}`;
      assert.equal(n, 0, "the deletion took the session it waited for");
    });
  },
});

Deno.test({
  ...RACE,
  name: "a deletion holding the user: a new session and a new key wait, then are refused",
  async fn() {
    await withUsers("hold_delete_first", async ({ store, sql, userId }) => {
      // A deletion that has deleted the user's row and not committed yet.
      const locked = Promise.withResolvers<void>();
      const commit = Promise.withResolvers<void>();
      const holding = sql.begin(async (tx) => {
        await tx`DELETE FROM users WHERE id = ${userId}`;
        locked.resolve();
        await commit.promise;
      });
      await locked.promise;
      const idHash = hashSecret("late-session");
      const inserting = settle(session(store, idHash, userId));
      const adding = settle(apiKey(store, "late-key", userId));
      await untilWaiting(sql, 2);
      commit.resolve();
      await holding;

      for (const [name, late] of [["session", await inserting], ["key", await adding]] as const) {
        assert.ok(
          "error" in late && late.error instanceof StoreConflict,
          `${name}: ${"error" in late ? late.error : "written"}`,
        );
      }
      const [{ sessions, keys }] = await sql<{ sessions: number; keys: number }[]>`SELECT
        (SELECT count(*)::int FROM portal_sessions) AS sessions,
        (SELECT count(*)::int FROM api_keys) AS keys`;
      assert.deepEqual({ sessions, keys }, { sessions: 0, keys: 0 });
    });
  },
});

Deno.test({
  ...RACE,
  name: "insertApiKey() without a cap: a user's second key does not wait for its first",
  async fn() {
    await withUsers("hold_keys", async ({ store, sql, userId, otherId }) => {
      const release = await holdKey(sql, "first-key", otherId);
      const adding = settle(apiKey(store, "first-key", userId));
      await untilWaiting(sql, 1); // the first holds its user, waits for the digest
      const second = await completesUnblocked(sql, apiKey(store, "second-key", userId), 1);
      assert.equal(second.userId, userId);
      await release();
      const first = await adding;
      assert.ok("value" in first, `the first failed: ${"error" in first && first.error}`);
      assert.deepEqual(
        (await store.listApiKeys(userId)).map((key) => key.prefix).sort(),
        ["first-key", "second-key"],
      );
    });
  },
});

Deno.test({
  ...RACE,
  name: "insertApiKey() without a cap, holding the user: a deletion waits, then deletes the key",
  async fn() {
    await withUsers("hold_key_delete", async ({ store, sql, userId, otherId }) => {
      const release = await holdKey(sql, "held-key", otherId);
      const adding = settle(apiKey(store, "held-key", userId));
      await untilWaiting(sql, 1);
      const deleting = settle(deleteUser(store, userId));
      await untilWaiting(sql, 2); // the deletion waits for the key's hold on the user
      await release();
      const added = await adding;
      assert.ok("value" in added, `the key failed: ${"error" in added && added.error}`);
      const deleted = await deleting;
      assert.ok("value" in deleted, `the deletion failed: ${"error" in deleted && deleted.error}`);
      assert.equal(deleted.value.apiKeys, 1, "the deletion took the key it waited for");
      assert.equal(await store.findApiKeyByHash(hashSecret("held-key")), undefined);
      assert.equal(await store.findUserById(userId), undefined);
    });
  },
});
