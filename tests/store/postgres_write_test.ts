/**
 * The PostgreSQL store's write tail against a real PostgreSQL: one statement that appends the
 * audit rows and then bumps the grant epoch (and notifies) or relaxes the commit, never both.
 */
import assert from "node:assert/strict";
import type postgres from "postgres";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreBlocked, StoreConflict } from "../../src/store/errors.ts";
import { endingClauses, finishWrite, toOwnChange } from "../../src/store/postgres/db.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { GRANT_CHANNEL } from "../../src/store/postgres/grant_epoch.ts";
import { migratePostgres } from "../../src/store/postgres/migrate.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { issue, seed, T0 } from "./_contract_fixtures.ts";
import { waitFor } from "../_helpers/wait_for.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

/** A migrated database, a client on it and a listener that records the notifications. */
async function setUp() {
  const url = await cluster!.createDatabase("write");
  const location = parseStoreUrl(url) as PostgresLocation;
  const notified: string[] = [];
  /** Each payload's last part: the database's clock (ms) just before the commit. */
  const committedAt: number[] = [];
  const sql = openPostgresClient(location, { max: 2 });
  const listener = openPostgresClient(location, {
    max: 1,
    onnotify: (channel, payload) => {
      if (channel !== GRANT_CHANNEL) return;
      const at = / @(\d+(?:\.\d+)?)(?: #[A-Za-z0-9]+)?$/.exec(payload);
      notified.push(at === null ? payload : payload.slice(0, at.index));
      committedAt.push(at === null ? NaN : Number(at[1]));
    },
  });
  await migratePostgres(sql);
  await listener.unsafe(`LISTEN ${GRANT_CHANNEL}`);
  return {
    url,
    sql,
    notified,
    committedAt,
    async epoch(): Promise<number> {
      const [row] = await sql<{ epoch: number }[]>`SELECT epoch FROM grant_epoch WHERE id = 1`;
      return row.epoch;
    },
    /**
     * Runs `finishWrite` in a transaction (`bump`: recording token 3's scope); resolves to the
     * position it bumped to and the commit setting.
     */
    finish(
      entries: Parameters<typeof finishWrite>[1],
      options: { bump: boolean; notify: boolean; relax: boolean },
    ) {
      return sql.begin(async (tx: postgres.TransactionSql) => {
        const own = await finishWrite(tx, entries, {
          scopes: options.bump ? [{ kind: "token", id: 3 }] : [],
          notify: options.notify,
          relax: options.relax,
          keep: 100,
        });
        const epoch = own?.position;
        const [{ setting }] = await tx<{ setting: string }[]>`
          SELECT current_setting('synchronous_commit') AS setting`;
        return { epoch, setting };
      });
    },
    async close() {
      await listener.end({ timeout: 0 });
      await sql.end({ timeout: 0 });
    },
  };
}

Deno.test({
  name: "finishWrite() appends every audit row in order, and relaxes only the commit it is told to",
  ignore,
  async fn() {
    const db = await setUp();
    try {
      const before = await db.epoch();
      const entries = [
        {
          at: 1_700_000_000_123,
          actor: "api_key:7",
          action: "token.issued",
          subject: "user:a@example.org",
          detail: { token_id: 41, client: "192.0.2.7" },
        },
        { at: 1_700_000_000_124, actor: "cli:root", action: "user.added", subject: "user:b" },
      ];
      const relaxed = await db.finish(entries, { bump: false, notify: true, relax: true });
      assert.deepEqual(relaxed, { epoch: undefined, setting: "off" });
      const strict = await db.finish([], { bump: false, notify: true, relax: false });
      assert.deepEqual(strict, { epoch: undefined, setting: "on" });
      // Nothing ended a grant: the epoch stood still and nobody was told.
      assert.equal(await db.epoch(), before);
      const rows = await db.sql`SELECT at, actor, action, subject, detail FROM audit_log
        ORDER BY id`;
      assert.deepEqual(rows.map((row) => ({ ...row })), [
        { ...entries[0] },
        { ...entries[1], detail: {} },
      ]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(db.notified, []);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name: "finishWrite() bumps the epoch and notifies it, and never relaxes a grant-ending commit",
  ignore,
  async fn() {
    const db = await setUp();
    try {
      const before = await db.epoch();
      const entry = { at: 5, actor: "cli:root", action: "token.revoked", subject: "token:3" };
      const bumped = await db.finish([entry], { bump: true, notify: true, relax: true });
      assert.deepEqual(bumped, { epoch: before + 1, setting: "on" });
      assert.equal(await db.epoch(), before + 1);
      await waitFor("notified", () => db.notified.length === 1);
      assert.deepEqual(db.notified, [`${before + 1} token:3`]);
      // Without notifications (an engine without NOTIFY): bumped, but nobody told.
      const quiet = await db.finish([], { bump: true, notify: false, relax: false });
      assert.deepEqual(quiet, { epoch: before + 2, setting: "on" });
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(db.notified, [`${before + 1} token:3`]);
      const [{ n }] = await db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_log`;
      assert.equal(n, 1);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name: "finishWrite() without a grant_epoch row fails the bump, and the transaction with it",
  ignore,
  async fn() {
    const db = await setUp();
    try {
      await db.sql`DELETE FROM grant_epoch`;
      const entry = { at: 5, actor: "cli:root", action: "token.revoked", subject: "token:3" };
      await assert.rejects(
        db.finish([entry], { bump: true, notify: true, relax: false }),
        /grant_epoch row is missing/,
      );
      const [{ n }] = await db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_log`;
      assert.equal(n, 0);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name: "a write the store refuses by design is observed as refused, a failure as an error",
  ignore,
  async fn() {
    const outcomes: string[] = [];
    const store = await openPostgresStore(await cluster!.createDatabase("outcome"), {
      onOperation: (kind, _seconds, outcome) => outcomes.push(`${kind} ${outcome}`),
    });
    try {
      const now = 1_000;
      const user = await store.insertUser(
        { email: "o@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
        { now, audit: undefined },
      );
      const key = await store.insertApiKey(
        { userId: user.id, keyHash: hashSecret("k"), prefix: "k", label: "" },
        { now, audit: undefined },
      );
      await store.recordLoginFailures(["key:1"], {
        now,
        next: (_previous, subject) => ({
          subject,
          failures: 5,
          lastFailureAt: now,
          blockedUntil: now + 60_000,
          forgetAt: now + 3_600_000,
        }),
        audit: undefined,
      });
      outcomes.length = 0;
      // A taken e-mail, and a login that a throttle counter blocks: refused.
      await assert.rejects(
        store.insertUser({ email: "o@b.org", passwordHash: "x", tokenTimeoutSeconds: null }, {
          now,
          audit: undefined,
        }),
        StoreConflict,
      );
      await assert.rejects(
        store.insertToken({
          tokenHash: hashSecret("t"),
          userId: user.id,
          apiKeyId: key.id,
          issuedAt: now,
          expiresAt: now + 60_000,
          maxLiveTokens: 100,
        }, { audit: undefined, unlessBlocked: { subjects: ["key:1"], now } }),
        StoreBlocked,
      );
      // A statement the database fails: an error.
      await assert.rejects(
        store.appendAudit({ at: now, actor: "nul\0", action: "x", subject: "s" }),
      );
      assert.deepEqual(outcomes, ["write refused", "write refused", "write error"]);
    } finally {
      await store.closeStore();
    }
  },
});

Deno.test({
  name: "endingClauses() with a SQL condition: false relaxes the commit; true bumps and notifies",
  ignore,
  async fn() {
    const db = await setUp();
    try {
      const before = await db.epoch();
      const run = (flag: boolean) =>
        db.sql.begin(async (tx: postgres.TransactionSql) => {
          const ending = endingClauses(tx, {
            bump: tx`(SELECT v FROM flag)`,
            notify: true,
            relax: true,
            changes: tx`SELECT 'token'::text, 3::bigint`,
            keep: 100,
          });
          const [row] = await tx`WITH flag AS (SELECT ${flag}::boolean AS v) ${ending.ctes}
            SELECT ${ending.columns}`;
          const [{ setting }] = await tx<{ setting: string }[]>`
            SELECT current_setting('synchronous_commit') AS setting`;
          const scopes = flag ? [{ kind: "token" as const, id: 3 }] : [];
          return { epoch: toOwnChange(row, scopes)?.position, setting };
        });
      assert.deepEqual(await run(false), { epoch: undefined, setting: "off" });
      assert.equal(await db.epoch(), before);
      assert.deepEqual(await run(true), { epoch: before + 1, setting: "on" });
      await waitFor("notified", () => db.notified.length === 1);
      assert.deepEqual(db.notified, [`${before + 1} token:3`]);
    } finally {
      await db.close();
    }
  },
});

Deno.test({
  name:
    "insertToken() over the cap bumps the epoch and notifies; under it, blocked or refused, not",
  ignore,
  async fn() {
    const db = await setUp();
    const store = await openPostgresStore(db.url);
    try {
      const { user, key } = await seed(store);
      const owner = { userId: user.id, apiKeyId: key.id };
      const before = await db.epoch();
      await issue(store, owner, "t2"); // under the cap of 100
      assert.equal(await db.epoch(), before);
      const seen = store.readGrantEpoch();
      assert.notEqual(seen, undefined);
      // Blocked, or the user changed: refused, and the cap of one revokes nothing either.
      await store.recordLoginFailures(["key:9"], {
        now: T0,
        next: (_, subject) => ({
          subject,
          failures: 5,
          lastFailureAt: T0,
          blockedUntil: T0 + 5000,
          forgetAt: T0 + 10_000,
        }),
        audit: undefined,
      });
      const capOfOne = (token: string, userCutoff?: number) => ({
        tokenHash: hashSecret(token),
        ...owner,
        issuedAt: T0 + 1,
        expiresAt: T0 + 60_000,
        maxLiveTokens: 1,
        userCutoff,
      });
      await assert.rejects(
        store.insertToken(capOfOne("t3"), {
          audit: undefined,
          unlessBlocked: { subjects: ["key:9"], now: T0 + 1 },
        }),
        StoreBlocked,
      );
      await assert.rejects(
        store.insertToken(capOfOne("t4", user.tokensValidFrom + 1), { audit: undefined }),
        StoreConflict,
      );
      assert.equal(await db.epoch(), before);
      assert.deepEqual(store.readGrantEpoch(), seen);
      // Over the cap: the two older tokens end, so the epoch moves and every instance is told.
      await issue(store, owner, "t5", { issuedAt: T0 + 2, maxLiveTokens: 1 });
      assert.equal(await db.epoch(), before + 1);
      // This instance's view moved at once (its value is opaque: only equality means anything).
      assert.notDeepEqual(store.readGrantEpoch(), seen);
      await waitFor("notified", () => db.notified.length === 1);
      // The payload names the position and the scopes: the two tokens the cap ended.
      const [first, second] = (await db.sql<{ id: number }[]>`
        SELECT id FROM tokens WHERE revoked_at IS NOT NULL ORDER BY id`).map((row) =>
        Number(row.id)
      );
      assert.deepEqual(db.notified, [`${before + 1} token:${first},token:${second}`]);
      // …and the database's clock just before the commit (one host: close to ours), for the
      // change-delay metric.
      assert.ok(Math.abs(db.committedAt[0] - Date.now()) < 60_000, String(db.committedAt));
      assert.deepEqual(
        store.readGrantChanges(seen!),
        [{ kind: "token", id: first }, { kind: "token", id: second }],
      );
      const [{ live }] = await db.sql<{ live: number }[]>`
        SELECT count(*)::int AS live FROM tokens WHERE revoked_at IS NULL`;
      assert.equal(live, 1);
    } finally {
      await store.closeStore();
      await db.close();
    }
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
