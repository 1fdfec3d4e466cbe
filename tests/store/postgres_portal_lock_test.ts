/**
 * The janitor's expiry of an unverified sign-up racing the sign-up's verification on PostgreSQL
 * (issue 25's review): both lock the user's row before its portal rows, so one waits for the
 * other and both finish, instead of a deadlock (a retryable 503 on `/verify`); and a new code
 * waiting on a deletion's lock is refused once the deletion commits. The race is held
 * open by a third transaction that holds the row the first writer needs after its first lock,
 * until the test, having seen both writers wait for a lock, commits it: never by timing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { settle, untilWaiting } from "../_helpers/lock_waits.ts";
import type postgres from "postgres";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { HOUR, NO_AUDIT, T0 } from "./_contract_fixtures.ts";

const cluster = await startTestCluster();

/** An unverified sign-up at T0 with its verification code; resolves to the user and code ids. */
async function signUp(store: Store, email: string) {
  const user = await store.insertPortalUser(
    { email, passwordHash: "$argon2id$w", tokenTimeoutSeconds: null },
    {
      now: T0,
      state: "pending_verification",
      code: { purpose: "verify", codeHash: new Uint8Array(32), expiresAt: T0 + HOUR },
      mail: { recipient: email, subject: "Verify", text: "Your code: ABCD-EFGH" },
      ...NO_AUDIT,
    },
  );
  const code = await store.findPortalCode(user.id, "verify", T0);
  return { userId: user.id, codeId: code!.id };
}

/** The janitor's expiry of sign-ups made before T0 + 1. */
function expire(store: Store) {
  return store.deleteUnverifiedPortalUsers(T0 + 1, {
    now: T0 + 2,
    limit: 10,
    anonymize: (userId) => ({
      anonymousRef: `user:deleted:${userId}`,
      anonymousActor: `portal:user:${userId}`,
    }),
    audit: () => [],
  });
}

/** A verification spending the code and activating the account. */
function verify(store: Store, codeId: number) {
  return store.usePortalCode(codeId, { now: T0 + 2, state: "active", ...NO_AUDIT });
}

/**
 * Locks the rows `lockSql` selects in a transaction that commits on `release()`: the first
 * writer that needs them waits there, after the locks it took before.
 */
async function holdRows(sql: postgres.Sql, lockSql: string) {
  const locked = Promise.withResolvers<void>();
  const commit = Promise.withResolvers<void>();
  const holding = sql.begin(async (tx) => {
    await tx.unsafe(lockSql);
    locked.resolve();
    await commit.promise;
  });
  await locked.promise;
  return async () => {
    commit.resolve();
    await holding;
  };
}

async function withRace(
  name: string,
  fn: (context: { store: Store; sql: postgres.Sql }) => Promise<void>,
) {
  const url = await cluster!.createDatabase(name);
  const store = await openPostgresStore(url);
  const sql = openPostgresClient(parseStoreUrl(url) as PostgresLocation, { max: 2 });
  try {
    await fn({ store, sql });
  } finally {
    // A failed wait leaves the holding transaction open: end it rather than wait for it.
    await sql.end({ timeout: 1 });
    await store.closeStore();
  }
}

Deno.test({
  name: "deleteUnverifiedPortalUsers() holding the user: a verification waits, then conflicts",
  ignore: cluster === undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withRace("lock_janitor_first", async ({ store, sql }) => {
      const { userId, codeId } = await signUp(store, "late@example.org");
      // The janitor locks the user, then waits here for the account.
      const release = await holdRows(
        sql,
        `SELECT 1 FROM portal_accounts WHERE user_id = ${userId} FOR UPDATE`,
      );
      const expiring = settle(expire(store));
      await untilWaiting(sql, 1);
      const verifying = settle(verify(store, codeId));
      await untilWaiting(sql, 2); // the verification waits for the janitor's user lock
      await release();

      const gone = await expiring;
      assert.ok("value" in gone, `the janitor failed: ${"error" in gone && gone.error}`);
      assert.deepEqual(gone.value.map((d) => d.userId), [userId], "the janitor deleted it");
      // Not a deadlock (StoreUnavailable): the code went with the account.
      const verified = await verifying;
      assert.ok(
        "error" in verified && verified.error instanceof StoreConflict,
        String(
          "error" in verified ? verified.error : "verified",
        ),
      );
      assert.equal(await store.findUserById(userId), undefined);
      assert.equal(await store.findPortalAccount(userId), undefined);
    });
  },
});

Deno.test({
  name: "usePortalCode() holding the user: the janitor waits, then keeps the verified account",
  ignore: cluster === undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withRace("lock_verify_first", async ({ store, sql }) => {
      const { userId, codeId } = await signUp(store, "just-in-time@example.org");
      // The verification locks the user, then waits here for the code.
      const release = await holdRows(
        sql,
        `SELECT 1 FROM portal_codes WHERE id = ${codeId} FOR UPDATE`,
      );
      const verifying = settle(verify(store, codeId));
      await untilWaiting(sql, 1);
      const expiring = settle(expire(store));
      await untilWaiting(sql, 2); // the janitor waits for the verification's user lock
      await release();

      assert.deepEqual(await verifying, { value: 0 }, "verified (no token to end)");
      assert.deepEqual(await expiring, { value: [] }, "the janitor found it verified, kept it");
      assert.equal((await store.findPortalAccount(userId))?.state, "active");
      assert.equal((await store.findUserById(userId))?.disabled, false);
    });
  },
});

Deno.test({
  name: "a deletion holding the user: a new code waits, then is refused and leaves nothing",
  ignore: cluster === undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withRace("lock_delete_first", async ({ store, sql }) => {
      const email = "deleting@example.org";
      const { userId, codeId } = await signUp(store, email);
      const mail = await store.countMail();
      // A deletion that has deleted the user's row and not committed yet.
      const release = await holdRows(sql, `DELETE FROM users WHERE id = ${userId}`);
      const adding = settle(store.addPortalCode(userId, {
        now: T0 + 1,
        code: { purpose: "verify", codeHash: new Uint8Array(32).fill(1), expiresAt: T0 + HOUR },
        mail: { recipient: email, subject: "Verify", text: "Your code: IJKL-MNOP" },
        keep: 3,
        audit: {
          at: T0 + 1,
          actor: "cli:test",
          action: "portal.sign_up_repeated",
          subject: `user:${email}`,
          detail: {},
        },
      }));
      await untilWaiting(sql, 1); // the new code waits for the user's row
      await release();

      const added = await adding;
      assert.ok(
        "error" in added && added.error instanceof StoreConflict,
        String("error" in added ? added.error : "added"),
      );
      const codes = await store.findPortalCodes(userId, "verify", T0 + 2);
      assert.deepEqual(codes.map((code) => code.id), [codeId], "only the sign-up's code");
      assert.deepEqual(await store.countMail(), mail, "no mail queued");
      assert.deepEqual(
        (await store.listAudit()).filter((row) => row.action === "portal.sign_up_repeated"),
        [],
      );
    });
  },
});
