/**
 * The PostgreSQL store's grant-ending commit, sent right behind the write's last statement
 * (transaction.ts `commitAfter`), against a real PostgreSQL: the commit happens without the
 * client (the epoch row's lock is not held for a round trip), a failing last statement commits
 * nothing and teaches the store nothing, a connection cut while the pipeline waits on the epoch
 * row's lock rejects the write, leaves nothing committed, and the store writes and closes
 * afterwards, and a login refused by its first statement commits nothing. What a failing COMMIT
 * leaves is in postgres_commit_failure_test.ts.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreBlocked, StoreConflict, StoreUnavailable } from "../../src/store/errors.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { untilWaiting } from "../_helpers/lock_waits.ts";
import { DEADLINE_MS, holdEpochRow, psqlPath, settlesWithin, strayEnds } from "./_pipelined.ts";
import { issue, seed, T0 } from "./_contract_fixtures.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

/** A store (pool of `max`) on a new database, seeded, with a client of the test's own. */
async function setUp(max: number, application: string) {
  const url = await cluster!.createDatabase("pipelined");
  const store = await openPostgresStore(url, { maxConnections: max, applicationName: application });
  const raw = postgres(url, { max: 2, onnotice: () => {} });
  const { user, key, tokenId: seeded } = await seed(store);
  const owner = { userId: user.id, apiKeyId: key.id };
  const tokens = [
    await issue(store, owner, "p1"),
    await issue(store, owner, "p2"),
    await issue(store, owner, "p3"),
  ];
  const [{ base }] = await raw<{ base: string }[]>`SELECT epoch AS base FROM grant_epoch`;
  return {
    url,
    store,
    raw,
    seeded,
    tokens,
    /** The stored state that a grant-ending write changes; positions counted from the seed's. */
    async state() {
      const [{ epoch }] = await raw<{ epoch: string }[]>`SELECT epoch FROM grant_epoch`;
      const changes = await raw<{ position: string; scope: string; subject: string }[]>`
        SELECT position, scope, subject FROM grant_changes
        WHERE position > ${base} ORDER BY position, subject`;
      const audit = await raw<{ action: string; subject: string }[]>`
        SELECT action, subject FROM audit_log ORDER BY id`;
      const revoked = await raw<{ id: string }[]>`
        SELECT id FROM tokens WHERE revoked_at IS NOT NULL ORDER BY id`;
      return {
        epoch: Number(epoch) - Number(base),
        changes: changes.map((c) => `${Number(c.position) - Number(base)} ${c.scope}:${c.subject}`),
        audit: audit.map((a) => `${a.action} ${a.subject}`),
        revoked: revoked.map((r) => Number(r.id)),
      };
    },
    /** Holds the grant_epoch row's lock (as a writer between its bump and its commit). */
    holdEpochRow: () => holdEpochRow(raw),
    async [Symbol.asyncDispose]() {
      await raw.end({ timeout: 1 });
      await store.closeStore();
    },
  };
}

const revocation = (tokenId: number) => ({
  now: T0 + 5,
  audit: { at: T0 + 5, actor: "cli:root", action: "token.revoked", subject: `token:${tokenId}` },
});

Deno.test({
  name: "a grant-ending write commits without a round trip to the client after its statement",
  ignore,
  async fn() {
    await using db = await setUp(1, "keygate-pipelined");
    const [first, second] = db.tokens;
    // Its first run on the connection parses the statement (the COMMIT waits for that answer);
    // from then on, the statement and its COMMIT leave together.
    assert.deepEqual(
      await strayEnds(cluster!, async () => {
        assert.equal(await db.store.revokeToken(first, revocation(first)), true);
      }),
      [],
    );
    const held = await db.holdEpochRow();
    const revoking = db.store.revokeToken(second, revocation(second));
    await untilWaiting(db.raw, 1);
    await held.release();
    // From here on this process answers nothing (the event loop is blocked): if the
    // revocation commits meanwhile, its COMMIT was already at the server.
    const psql = psqlPath();
    const deadline = Date.now() + DEADLINE_MS;
    let seen = "";
    while (seen !== "1" && Date.now() < deadline) {
      const out = new Deno.Command(psql, {
        args: [
          "-X",
          "-A",
          "-t",
          "-c",
          `SELECT count(*) FROM tokens WHERE id = ${second} AND revoked_at IS NOT NULL`,
          db.url.replace("?sslmode=disable", ""),
        ],
        stdout: "piped",
        stderr: "piped",
      }).outputSync();
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      seen = new TextDecoder().decode(out.stdout).trim();
    }
    assert.equal(seen, "1", "the revocation committed while the client was not answering");
    assert.equal(await settlesWithin("the revocation", revoking), true);
    assert.deepEqual(await db.state(), {
      epoch: 2,
      changes: [`1 token:${first}`, `2 token:${second}`],
      audit: [`token.revoked token:${first}`, `token.revoked token:${second}`],
      revoked: [first, second],
    });
  },
});

Deno.test({
  name:
    "a failing last statement (its COMMIT answered with a rollback) rejects as before, commits nothing, teaches nothing",
  ignore,
  async fn() {
    await using db = await setUp(1, "keygate-pipelined");
    const [first, second] = db.tokens;
    assert.equal(await db.store.revokeToken(first, revocation(first)), true);
    // A second audit row naming the same revoked token is refused (a unique index of this
    // test's): the write's last statement, which appends it, fails with a unique violation.
    await db.raw`CREATE UNIQUE INDEX once ON audit_log (subject) WHERE action = 'token.revoked'`;
    await db.raw`INSERT INTO audit_log (at, actor, action, subject, detail)
      VALUES (1, 'test', 'token.revoked', ${`token:${second}`}, '{}')`;
    const stateBefore = await db.state();
    const seen = db.store.readGrantEpoch();
    assert.deepEqual(
      await strayEnds(cluster!, async () => {
        await assert.rejects(db.store.revokeToken(second, revocation(second)), StoreConflict);
      }),
      [],
    );
    assert.deepEqual(await db.state(), stateBefore);
    assert.deepEqual(stateBefore.revoked, [first]);
    // The store learned nothing of its own (no position, no scope), and its next write works.
    assert.deepEqual(db.store.readGrantEpoch(), seen);
    assert.deepEqual(db.store.readGrantChanges(seen!), []);
    const [, , third] = db.tokens;
    assert.equal(await db.store.revokeToken(third, revocation(third)), true);
    assert.deepEqual(db.store.readGrantChanges(seen!), [{ kind: "token", id: third }]);
    assert.deepEqual(await db.state(), {
      epoch: 2,
      changes: [`1 token:${first}`, `2 token:${third}`],
      audit: [...stateBefore.audit, `token.revoked token:${third}`],
      revoked: [first, third],
    });
  },
});

Deno.test({
  name:
    "a connection cut while the statement waits on the epoch row rejects the write, commits nothing, and the store writes and closes after",
  ignore,
  async fn() {
    const db = await setUp(1, "keygate-cut");
    try {
      const [first, second, third] = db.tokens;
      assert.equal(await db.store.revokeToken(first, revocation(first)), true);
      const stateBefore = await db.state();
      const seen = db.store.readGrantEpoch();
      const held = await db.holdEpochRow();
      const revoking = db.store.revokeToken(second, revocation(second));
      revoking.catch(() => {}); // asserted below
      await untilWaiting(db.raw, 1);
      const killed = await db.raw<{ ok: boolean }[]>`SELECT pg_terminate_backend(pid) AS ok
        FROM pg_stat_activity
        WHERE application_name = 'keygate-cut' AND wait_event_type = 'Lock'`;
      assert.deepEqual(killed.map((row) => row.ok), [true]);
      await assert.rejects(settlesWithin("the cut write", revoking), StoreUnavailable);
      await held.release();
      assert.deepEqual(await db.state(), stateBefore);
      assert.deepEqual(db.store.readGrantEpoch(), seen);
      // The pool's one connection opens again. postgres.js hands the killed session's FATAL
      // (admin_shutdown) to the first query on it: at most one write is refused, as unavailable.
      let refused = 0;
      let revoked: boolean | undefined;
      while (revoked === undefined) {
        try {
          revoked = await settlesWithin(
            "a write",
            db.store.revokeToken(second, revocation(second)),
          );
        } catch (error) {
          assert.ok(error instanceof StoreUnavailable, String(error));
          assert.ok(++refused <= 1, "more than one write refused after the cut");
        }
      }
      assert.equal(revoked, true);
      assert.equal(await db.store.revokeToken(third, revocation(third)), true);
      assert.deepEqual(await db.state(), {
        epoch: stateBefore.epoch + 2,
        changes: [...stateBefore.changes, `2 token:${second}`, `3 token:${third}`],
        audit: [
          ...stateBefore.audit,
          `token.revoked token:${second}`,
          `token.revoked token:${third}`,
        ],
        revoked: [first, second, third],
      });
    } finally {
      await db.raw.end({ timeout: 1 });
      await settlesWithin("closing the store", db.store.closeStore());
    }
  },
});

Deno.test({
  name:
    "a login refused by its first statement commits nothing: no token, no cap, counters kept, no bump",
  ignore,
  async fn() {
    await using db = await setUp(1, "keygate-login");
    const [{ userId, apiKeyId, tokensValidFrom }] = await db.raw<
      { userId: number; apiKeyId: number; tokensValidFrom: number }[]
    >`SELECT u.id::int AS "userId", k.id::int AS "apiKeyId",
        u.tokens_valid_from::float8 AS "tokensValidFrom"
      FROM users u JOIN api_keys k ON k.user_id = u.id`;
    const counter = (subject: string, blockedUntil: number) => ({
      subject,
      failures: 5,
      lastFailureAt: T0,
      blockedUntil,
      forgetAt: T0 + 3_600_000,
    });
    await db.store.recordLoginFailures(["key:9", "user:7"], {
      now: T0,
      next: (_, subject) => counter(subject, subject === "key:9" ? T0 + 60_000 : 0),
      audit: undefined,
    });
    const counters = () =>
      db.raw<{ subject: string }[]>`SELECT subject FROM login_failures ORDER BY subject`;
    const stateBefore = await db.state();
    const seen = db.store.readGrantEpoch();
    // A cap of one would revoke the three live tokens' two older ones, and clear user:7's
    // counter: a login that inserts no token must do neither.
    const login = (token: string, userCutoff?: number) =>
      db.store.insertToken({
        tokenHash: hashSecret(token),
        userId,
        apiKeyId,
        issuedAt: T0 + 10,
        expiresAt: T0 + 60_000,
        maxLiveTokens: 1,
        userCutoff,
      }, {
        audit: { at: T0 + 10, actor: "api_key:1", action: "token.issued", subject: "user:a" },
        clearLoginFailures: ["user:7"],
        unlessBlocked: { subjects: ["key:9"], now: T0 + 10 },
      });
    await assert.rejects(login("blocked"), StoreBlocked);
    await db.store.clearLoginFailures(["key:9"], { now: T0 + 10, audit: undefined });
    await assert.rejects(login("changed", tokensValidFrom + 1), StoreConflict);
    assert.deepEqual(await db.state(), stateBefore);
    assert.deepEqual((await counters()).map((row) => row.subject), ["user:7"]);
    const [{ n }] = await db.raw<{ n: number }[]>`SELECT count(*)::int AS n FROM tokens`;
    assert.equal(n, 4);
    assert.deepEqual(db.store.readGrantEpoch(), seen);
    // The same login unrefused: the token, the cap (one bump for the four it ended), the counter.
    const id = await login("issued", tokensValidFrom);
    const ended = [db.seeded, ...db.tokens];
    assert.deepEqual(await db.state(), {
      epoch: 1,
      changes: ended.map((tokenId) => `1 token:${tokenId}`),
      audit: [...stateBefore.audit, "token.issued user:a"],
      revoked: ended,
    });
    assert.deepEqual((await counters()).map((row) => row.subject), []);
    const learned = db.store.readGrantChanges(seen!) ?? [];
    assert.deepEqual(
      learned.map((scope) => scope.kind === "all" ? "all" : `${scope.kind}:${scope.id}`).sort(),
      ended.map((tokenId) => `token:${tokenId}`).sort(),
    );
    assert.ok(id > Math.max(...ended));
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
