/**
 * The PostgreSQL store's grant-ending commit, sent right behind the write's last statement
 * (transaction.ts `commitAfter`), against a real PostgreSQL: the commit happens without the
 * client (the epoch row's lock is not held for a round trip), a failing last statement or COMMIT
 * commits nothing and teaches the store nothing, a failed COMMIT sends nothing more on the
 * connection the pool got back (the writes queued behind it commit), a statement re-sent behind
 * its COMMIT is refused as unavailable, a missing epoch row is a store error, a write whose
 * commit succeeded resolves even when its empty chained transaction cannot be ended, and a
 * connection cut while the pipeline waits on the epoch row's lock rejects the write, leaves
 * nothing committed, and the store writes and closes afterwards.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { hashSecret } from "../../src/auth/credentials.ts";
import {
  StoreBlocked,
  StoreConflict,
  StoreError,
  StoreUnavailable,
} from "../../src/store/errors.ts";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { createPgContext, toOwnChange } from "../../src/store/postgres/db.ts";
import { commitAfter } from "../../src/store/postgres/transaction.ts";
import { createGrantEpochWatcher } from "../../src/store/postgres/grant_epoch.ts";
import { migratePostgres } from "../../src/store/postgres/migrate.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import {
  findPostgresBin,
  POSTGRES_SKIP,
  type PostgresCluster,
  startPostgres,
} from "../_helpers/postgres_cluster.ts";
import { untilWaiting } from "../_helpers/lock_waits.ts";
import { issue, seed, T0 } from "./_contract_fixtures.ts";

const cluster: PostgresCluster | undefined = POSTGRES_SKIP ? undefined : await startPostgres();
const ignore = cluster === undefined;

/** Far beyond any load: a write that has not settled by then hangs, and fails the test. */
const DEADLINE_MS = 30_000;

/**
 * The lines of the server's log about a COMMIT or ROLLBACK with no transaction open, written
 * while `run` ran (none: the chained transaction was there for `begin` to end).
 */
async function strayEnds(run: () => Promise<void>): Promise<string[]> {
  const log = `${cluster!.dir}/server.log`;
  const before = (await Deno.readTextFile(log)).length;
  await run();
  return (await Deno.readTextFile(log)).slice(before).split("\n")
    .filter((line) => line.includes("there is no transaction in progress"));
}

/** `promise`, or a rejection naming `what` after {@link DEADLINE_MS}. */
async function settlesWithin<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle`)), DEADLINE_MS);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

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
    /** Holds the grant_epoch row's lock (as a writer between its bump and its commit) until released. */
    async holdEpochRow(): Promise<{ release(): Promise<void> }> {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const holding = raw.begin(async (tx) => {
        await tx`SELECT epoch FROM grant_epoch WHERE id = 1 FOR UPDATE`;
        locked();
        await released;
      });
      await Promise.race([isLocked, holding]);
      return {
        async release() {
          release();
          await holding;
        },
      };
    },
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

/**
 * `psql` (the client beside the server's binaries, or on the PATH), for a query made while this
 * process's event loop is blocked.
 */
function psqlPath(): string {
  const beside = `${findPostgresBin() ?? ""}/psql`;
  try {
    if (Deno.statSync(beside).isFile) return beside;
  } catch {
    // Not beside the server: Debian puts the client on the PATH.
  }
  return "psql";
}

Deno.test({
  name: "a grant-ending write commits without a round trip to the client after its statement",
  ignore,
  async fn() {
    await using db = await setUp(1, "keygate-pipelined");
    const [first, second] = db.tokens;
    // Its first run on the connection parses the statement (the COMMIT waits for that answer);
    // from then on, the statement and its COMMIT leave together.
    assert.deepEqual(
      await strayEnds(async () => {
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
      await strayEnds(async () => {
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

/**
 * A context (pool of `max`, named `application`) on a new database with a table `pairs` whose
 * values are unique at commit (a deferred constraint), and `write(values)`: a self-ending write
 * that inserts them and bumps the epoch for token 9 in one statement, its COMMIT right behind
 * it. `onLearn` runs in the watcher's `learnOwn`, before the change is learned.
 */
async function openDeferred(max: number, application: string, onLearn?: () => void) {
  const url = await cluster!.createDatabase("deferred");
  const location = parseStoreUrl(url) as PostgresLocation;
  const sql = openPostgresClient(location, { max, applicationName: application });
  await migratePostgres(sql);
  const watcher = createGrantEpochWatcher({ sql });
  const learned: number[] = [];
  const db = createPgContext({
    sql,
    watcher: Object.assign(Object.create(watcher), {
      learnOwn(change: Parameters<typeof watcher.learnOwn>[0]) {
        onLearn?.();
        learned.push(change.position);
        watcher.learnOwn(change);
      },
    }),
    notify: true,
    durability: "grants",
    isClosed: () => false,
  });
  await watcher.ready();
  await sql`CREATE TABLE pairs (v int, CONSTRAINT once UNIQUE (v) DEFERRABLE INITIALLY DEFERRED)`;
  const seen = watcher.read()!;
  const [{ base }] = await sql<{ base: number }[]>`SELECT epoch AS base FROM grant_epoch`;
  const scopes = [{ kind: "token" as const, id: 9 }];
  return {
    url,
    sql,
    db,
    watcher,
    seen,
    base,
    scopes,
    /** The positions learned by `learnOwn`, in order. */
    learned,
    /** A self-ending write of `values` that bumps the epoch for token 9, then commits. */
    write: (values: number[]) =>
      db.write(async (tx) => {
        const ending = db.endingClauses(tx, {
          bump: true,
          relaxed: false,
          changes: tx`SELECT 'token'::text, 9::bigint`,
        });
        const [[row]] = await commitAfter(tx, [
          tx`WITH added AS (INSERT INTO pairs
            SELECT x::int FROM jsonb_array_elements_text(${tx.json(values)}) AS x) ${ending.ctes}
            SELECT ${ending.columns}`,
        ]);
        return toOwnChange(row, scopes);
      }, { recorded: (own) => own }),
    /** The values committed, in order, and the epoch counted from the base. */
    async state() {
      const rows = await sql<{ v: number }[]>`SELECT v FROM pairs ORDER BY v`;
      const [{ epoch }] = await sql<{ epoch: number }[]>`SELECT epoch FROM grant_epoch`;
      return { values: rows.map((row) => row.v), epoch: Number(epoch) - Number(base) };
    },
    async [Symbol.asyncDispose]() {
      await watcher.close();
      await sql.end({ timeout: 1 });
    },
  };
}

Deno.test({
  name:
    "a COMMIT that fails (a deferred constraint) rejects the write, commits nothing, teaches nothing",
  ignore,
  async fn() {
    await using db = await openDeferred(2, "keygate-deferred");
    // The statement succeeds (the check is deferred); the COMMIT fails, and rolls back.
    assert.deepEqual(
      await strayEnds(async () => {
        await assert.rejects(settlesWithin("the failing write", db.write([1, 1])), StoreConflict);
      }),
      [],
    );
    assert.deepEqual(await db.state(), { values: [], epoch: 0 });
    assert.deepEqual(db.watcher.changesSince(db.seen), []);
    assert.deepEqual(db.learned, []);
    // The same write that commits: learned at once.
    const own = await db.write([1, 2]);
    assert.equal(own?.position, db.base + 1);
    assert.deepEqual(db.watcher.changesSince(db.seen), db.scopes);
    assert.deepEqual(db.learned, [db.base + 1]);
  },
});

for (const max of [1, 4]) {
  Deno.test({
    name:
      `a COMMIT that fails hands its connection back to the pool (of ${max}): the write rejects, the writes queued behind it commit, nothing is sent on it after`,
    ignore,
    async fn() {
      await using db = await openDeferred(max, "keygate-deferred");
      // The failing COMMIT's session is idle (no chained transaction): postgres.js gives its
      // connection to the next queued write at once. The failing write must send nothing
      // more on it (its ROLLBACK would land in that write's transaction, or nowhere).
      const stray = await strayEnds(async () => {
        const failing = [0, 1, 2].map((i) => db.write([i, i]));
        const committing = [0, 1, 2, 3, 4].map((i) => db.write([10 + i]));
        const outcomes = await settlesWithin(
          "the writes",
          Promise.allSettled([...failing, ...committing]),
        );
        for (const outcome of outcomes.slice(0, failing.length)) {
          assert.equal(outcome.status, "rejected");
          assert.ok(
            (outcome as PromiseRejectedResult).reason instanceof StoreConflict,
            String((outcome as PromiseRejectedResult).reason),
          );
        }
        const positions = outcomes.slice(failing.length).map((outcome) => {
          assert.equal(
            outcome.status,
            "fulfilled",
            String((outcome as PromiseRejectedResult).reason),
          );
          return (outcome as PromiseFulfilledResult<{ position: number } | undefined>).value!
            .position;
        });
        assert.deepEqual(
          positions.toSorted((a, b) => a - b),
          [1, 2, 3, 4, 5].map((n) => db.base + n),
        );
      });
      assert.deepEqual(stray, []);
      assert.deepEqual(await db.state(), { values: [10, 11, 12, 13, 14], epoch: 5 });
      assert.deepEqual(
        db.learned.toSorted((a, b) => a - b),
        [1, 2, 3, 4, 5].map((n) => db.base + n),
      );
      // The pool is whole (no connection left to the failed writes): as many writes at once as
      // it has connections, each in its own transaction waiting on the epoch row, and each
      // commits once the row is free.
      const raw = postgres(db.url, { max: 2, onnotice: () => {} });
      try {
        let release!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        let locked!: () => void;
        const isLocked = new Promise<void>((resolve) => (locked = resolve));
        const holding = raw.begin(async (tx) => {
          await tx`SELECT epoch FROM grant_epoch WHERE id = 1 FOR UPDATE`;
          locked();
          await released;
        });
        await Promise.race([isLocked, holding]);
        const full = Promise.all(Array.from({ length: max }, (_, i) => db.write([20 + i])));
        full.catch(() => {}); // awaited below
        await untilWaiting(raw, max);
        release();
        await holding;
        await settlesWithin("a full pool's writes", full);
      } finally {
        await raw.end({ timeout: 1 });
      }
      assert.equal((await db.state()).epoch, 5 + max);
    },
  });
}

Deno.test({
  name:
    "a statement re-sent behind its COMMIT (a stale prepared plan) rejects the write as unavailable, commits nothing",
  ignore,
  async fn() {
    await using db = await openDeferred(1, "keygate-stale");
    /** A write whose result has a column of the type of `pairs.v`. */
    const write = (values: number[]) =>
      db.db.write(async (tx) => {
        const ending = db.db.endingClauses(tx, {
          bump: true,
          relaxed: false,
          changes: tx`SELECT 'token'::text, 9::bigint`,
        });
        const [[row]] = await commitAfter(tx, [
          // Not a JSON parameter: postgres.js 3.4.9 serialises one again when it re-sends.
          tx`WITH added AS (INSERT INTO pairs
            SELECT x::int FROM unnest(string_to_array(${values.join(",")}, ',')) AS x RETURNING v)
            ${ending.ctes}
            SELECT ${ending.columns}, (SELECT max(v) FROM added) AS top`,
        ]);
        return toOwnChange(row, db.scopes);
      }, { recorded: (own) => own });
    assert.equal((await write([1]))?.position, db.base + 1);
    // The statement prepared on the pool's one connection now returns another type: its next
    // run fails ("cached plan must not change result type"), its COMMIT is already sent behind
    // it and rolls back, and postgres.js re-sends it (prepared afresh) after that COMMIT.
    await db.sql`ALTER TABLE pairs ALTER COLUMN v TYPE bigint`;
    const stray = await strayEnds(async () => {
      await assert.rejects(
        settlesWithin("the re-sent write", write([2])),
        (error) =>
          error instanceof StoreUnavailable &&
          error.message ===
            'Database busy: try again: the commit ended as "ROLLBACK" (a statement was re-sent)',
      );
    });
    assert.deepEqual(stray, []);
    assert.deepEqual(await db.state(), { values: [1], epoch: 1 });
    assert.deepEqual(db.learned, [db.base + 1]);
    // Tried again, it commits.
    assert.equal((await write([2]))?.position, db.base + 2);
    assert.deepEqual(await db.state(), { values: [1, 2], epoch: 2 });
  },
});

Deno.test({
  name: "a grant-ending write without a grant_epoch row rejects as a store error, commits nothing",
  ignore,
  async fn() {
    await using db = await openDeferred(1, "keygate-unannounced");
    await db.sql`DELETE FROM grant_epoch`;
    await assert.rejects(
      db.write([1]),
      (error) =>
        error instanceof StoreError && error.constructor === StoreError &&
        error.message === "The grant_epoch row is missing",
    );
    const [{ n }] = await db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pairs`;
    assert.equal(n, 0);
    assert.deepEqual(db.learned, []);
  },
});

Deno.test({
  name:
    "a write whose COMMIT succeeded resolves, learned first, when ending its empty chained transaction fails",
  ignore,
  async fn() {
    const application = "keygate-chained-end";
    let ended: string | undefined;
    // Blocks this process's event loop (so the client answers nothing) while the server ends
    // the session: the chained transaction is open, idle, and `begin` has not ended it yet.
    const endSession = () => {
      const run = (query: string) => {
        const out = new Deno.Command(psqlPath(), {
          args: ["-X", "-A", "-t", "-c", query, url.replace("?sslmode=disable", "")],
          stdout: "piped",
          stderr: "piped",
        }).outputSync();
        assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
        return new TextDecoder().decode(out.stdout).trim();
      };
      ended = run(`WITH idle AS MATERIALIZED (SELECT pid FROM pg_stat_activity
          WHERE application_name = '${application}' AND state = 'idle in transaction')
        SELECT count(*) FROM idle WHERE pg_terminate_backend(pid)`);
      const deadline = Date.now() + DEADLINE_MS;
      while (
        run(`SELECT count(*) FROM pg_stat_activity WHERE application_name = '${application}'`) !==
          "0" && Date.now() < deadline
      );
    };
    let armed = false;
    await using db = await openDeferred(1, application, () => armed && endSession());
    const url = db.url;
    assert.equal((await db.write([1]))?.position, db.base + 1);
    armed = true;
    const own = await settlesWithin("the write", db.write([2]));
    assert.equal(ended, "1", "the session was ended in the chained transaction");
    assert.equal(own?.position, db.base + 2);
    assert.deepEqual(db.learned, [db.base + 1, db.base + 2]);
    assert.deepEqual(db.watcher.changesSince(db.seen), [...db.scopes, ...db.scopes]);
    armed = false;
    // postgres.js hands the ended session's FATAL (admin_shutdown) to the pool's first query
    // after it: at most one is refused, as unavailable; then the pool writes again.
    let refused = 0;
    let third: { position: number } | undefined;
    while (third === undefined) {
      try {
        third = await settlesWithin("a write", db.write([3]));
      } catch (error) {
        assert.ok(error instanceof StoreUnavailable, String(error));
        assert.ok(++refused <= 1, "more than one write refused after the end");
      }
    }
    assert.equal(third.position, db.base + 3);
    assert.deepEqual(await db.state(), { values: [1, 2, 3], epoch: 3 });
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
