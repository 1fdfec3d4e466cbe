/**
 * The PostgreSQL store's grant-ending commit when the COMMIT sent behind the write's last statement
 * (transaction.ts `commitAfter`) fails, against a real PostgreSQL: the write rejects, commits
 * nothing and teaches the store nothing, and nothing more is sent on the connection the pool got
 * back (the writes queued behind it commit); a statement re-sent behind its COMMIT is refused as
 * unavailable; a missing epoch row is a store error; a write whose commit succeeded resolves even
 * when its empty chained transaction cannot be ended.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { StoreConflict, StoreError, StoreUnavailable } from "../../src/store/errors.ts";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { createPgContext, toOwnChange } from "../../src/store/postgres/db.ts";
import { commitAfter } from "../../src/store/postgres/transaction.ts";
import { createGrantEpochWatcher } from "../../src/store/postgres/grant_epoch.ts";
import { migratePostgres } from "../../src/store/postgres/migrate.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { untilWaiting } from "../_helpers/lock_waits.ts";
import { DEADLINE_MS, holdEpochRow, psqlPath, settlesWithin, strayEnds } from "./_pipelined.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

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
      await strayEnds(cluster!, async () => {
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
      const stray = await strayEnds(cluster!, async () => {
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
        const held = await holdEpochRow(raw);
        const full = Promise.all(Array.from({ length: max }, (_, i) => db.write([20 + i])));
        full.catch(() => {}); // awaited below
        await untilWaiting(raw, max);
        await held.release();
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
    const stray = await strayEnds(cluster!, async () => {
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

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
