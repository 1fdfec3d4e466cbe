/**
 * How fast one keygate instance commits grant-ending writes (issue 23, the revoker's side):
 * concurrent token revocations through the store, `IN_FLIGHT` at a time, with the server's
 * durability ("grants") and production flush settings, on SQLite (a temporary file) and on
 * PostgreSQL (a throwaway cluster with `fsync = on`). Prints revocations per second; on SQLite
 * the WAL syncs they took (shared by the commits made during one); on PostgreSQL the wait
 * events of the writing sessions (sampled from `pg_stat_activity`), and the same shape of
 * commit in plain SQL with and without its parts (the epoch row's lock, `pg_notify`), which
 * says what serialises the commits.
 *
 *   deno run -A scripts/bench/revocation_commits.ts [sqlite|postgres|both] [revocations]
 *
 * A diagnostic: nothing else imports it, and its figures are only comparable within one run.
 *
 * @module
 */
import postgres from "postgres";
import { MAX_OUTSTANDING } from "./mix_traffic.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import type { Store } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { findPostgresBin, startPostgres } from "../../tests/_helpers/postgres_cluster.ts";

/** Revocations in flight at once, as the production mix's revoker keeps. */
const IN_FLIGHT = MAX_OUTSTANDING;
const USERS = 64;

const which = Deno.args[0] ?? "both";
const count = Number(Deno.args[1] ?? 2000);

/** Users, each with a key and its share of `count` tokens; the tokens' ids. */
async function seedTokens(store: Store): Promise<number[]> {
  const ids: number[] = [];
  const owners = [];
  for (let u = 0; u < USERS; u++) {
    const user = await store.insertUser(
      { email: `rc${u}@example.org`, passwordHash: "x", tokenTimeoutSeconds: null },
      { now: 1000, audit: undefined },
    );
    const key = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret(`key-${u}`), prefix: `k${u}`, label: "" },
      { now: 1000, audit: undefined },
    );
    owners.push({ user, key });
  }
  for (let i = 0; i < count; i++) {
    const { user, key } = owners[i % USERS];
    const tokenId = await store.insertToken({
      tokenHash: hashSecret(`token-${i}`),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: 1000,
      expiresAt: 10_000_000_000_000,
      maxLiveTokens: 1_000_000,
    }, { audit: undefined });
    ids.push(tokenId);
  }
  return ids;
}

/** Runs `task(i)` for every i < n, `IN_FLIGHT` at a time; the seconds it took. */
async function runConcurrently(n: number, task: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next < n) await task(next++);
  }));
  return (performance.now() - started) / 1000;
}

function revokeAll(store: Store, ids: number[]): Promise<number> {
  return runConcurrently(ids.length, (i) =>
    store.revokeToken(ids[i], {
      now: 2000,
      audit: { at: 2000, actor: "bench", action: "token.revoked", subject: `token:${ids[i]}` },
    }));
}

const rate = (n: number, seconds: number) => Math.round(n / seconds).toLocaleString("en");

async function measureSqlite(): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "keygate-rc-" });
  try {
    const store = openSqliteStore(`${dir}/db.sqlite3`, { durability: "grants" });
    const ids = await store.sqlite.runBulkTransaction(() => seedTokens(store));
    const syncs = store.sqlite.readWalSyncs();
    const seconds = await revokeAll(store, ids);
    console.log(
      `sqlite: ${ids.length} revocations, ${IN_FLIGHT} in flight: ${
        rate(ids.length, seconds)
      }/s, ` +
        `${store.sqlite.readWalSyncs() - syncs} WAL syncs`,
    );
    await store.closeStore();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Wait events of the database's other active sessions, sampled until `done` settles. */
async function sampleWaits(url: string, done: Promise<unknown>): Promise<Map<string, number>> {
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  const counts = new Map<string, number>();
  let finished = false;
  done.finally(() => finished = true);
  while (!finished) {
    const rows = await admin<{ wait: string; n: number }[]>`
      SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait, count(*)::int AS n
      FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
        AND backend_type = 'client backend'
      GROUP BY 1`;
    for (const { wait, n } of rows) counts.set(wait, (counts.get(wait) ?? 0) + n);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  await admin.end();
  return counts;
}

function formatWaits(counts: Map<string, number>): string {
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  return [...counts].sort((a, b) => b[1] - a[1]).slice(0, 6)
    .map(([wait, n]) => `${wait} ${Math.round((100 * n) / total)}%`).join(", ");
}

/** The shape of a revocation's commit in plain SQL, with or without its parts. */
async function measureShapes(url: string): Promise<void> {
  const sql = postgres(url, { max: IN_FLIGHT, onnotice: () => {} });
  await sql`CREATE TABLE rc_rows (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0)`;
  await sql`CREATE TABLE rc_epoch (id int PRIMARY KEY, epoch bigint NOT NULL)`;
  await sql`INSERT INTO rc_rows (id) SELECT generate_series(0, ${count})`;
  await sql`INSERT INTO rc_epoch VALUES (1, 0)`;
  const shapes: [string, (tx: postgres.TransactionSql, i: number) => Promise<unknown>][] = [
    ["row only", (tx, i) => tx`UPDATE rc_rows SET v = v + 1 WHERE id = ${i}`],
    ["row + pg_notify", (tx, i) =>
      tx`WITH u AS (UPDATE rc_rows SET v = v + 1 WHERE id = ${i})
      SELECT pg_notify('rc', ${String(i)})`],
    ["row + epoch bump", (tx, i) =>
      tx`WITH u AS (UPDATE rc_rows SET v = v + 1 WHERE id = ${i})
      UPDATE rc_epoch SET epoch = epoch + 1 WHERE id = 1`],
    [
      "row + bump + pg_notify (keygate)",
      (tx, i) =>
        tx`WITH u AS (UPDATE rc_rows SET v = v + 1 WHERE id = ${i}),
        b AS (UPDATE rc_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch)
      SELECT pg_notify('rc', epoch::text) FROM b`,
    ],
  ];
  for (const [name, statement] of shapes) {
    const done = runConcurrently(count, (i) => sql.begin((tx) => statement(tx, i)));
    const waits = sampleWaits(url, done);
    const seconds = await done;
    console.log(
      `postgres plain SQL, ${name}: ${rate(count, seconds)} commits/s; waits: ${
        formatWaits(await waits)
      }`,
    );
  }
  // keygate's shape with the COMMIT sent in the same round trip as the last statement: the
  // epoch row's lock is then held for the server's commit alone, not also for a round trip to
  // the client (whose event loop may be busy) and back.
  const pipelined = runConcurrently(count, async (i) => {
    const connection = await sql.reserve();
    try {
      await Promise.all([
        connection`BEGIN`,
        connection`WITH u AS (UPDATE rc_rows SET v = v + 1 WHERE id = ${i}),
          b AS (UPDATE rc_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch)
          SELECT pg_notify('rc', epoch::text) FROM b`,
        connection`COMMIT`,
      ]);
    } finally {
      connection.release();
    }
  });
  console.log(
    `postgres plain SQL, keygate's shape, COMMIT pipelined: ${
      rate(count, await pipelined)
    } commits/s`,
  );
  // What the store does (db.ts commitAfter): COMMIT AND CHAIN sent behind the last statement
  // inside sql.begin, whose own COMMIT then ends the empty chained transaction.
  const chained = runConcurrently(count, (i) =>
    sql.begin((tx) =>
      Promise.all([
        tx`WITH u AS (UPDATE rc_rows SET v = v + 1 WHERE id = ${i}),
          b AS (UPDATE rc_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch)
          SELECT pg_notify('rc', epoch::text) FROM b`,
        tx`COMMIT AND CHAIN`,
      ])
    ));
  console.log(
    `postgres plain SQL, keygate's shape, COMMIT AND CHAIN pipelined in begin: ${
      rate(count, await chained)
    } commits/s`,
  );
  // The notification after the commit, in a transaction of its own that waits for no flush.
  const afterCommit = runConcurrently(count, async (i) => {
    const [row] = await sql.begin((tx) =>
      tx`WITH u AS (UPDATE rc_rows SET v = v + 1 WHERE id = ${i})
        UPDATE rc_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch`
    );
    await sql.begin(async (tx) => {
      await tx`SET LOCAL synchronous_commit = off`;
      await tx`SELECT pg_notify('rc', ${String(row.epoch)})`;
    });
  });
  console.log(
    `postgres plain SQL, row + bump, then pg_notify unflushed: ${
      rate(count, await afterCommit)
    } commits/s`,
  );
  await sql.end();
}

/** `pg_test_fsync` beside the cluster's binaries, or in Debian's versioned directories. */
function findPgTestFsync(): string {
  const dirs = [findPostgresBin() ?? ""];
  try {
    for (const entry of Deno.readDirSync("/usr/lib/postgresql")) {
      dirs.push(`/usr/lib/postgresql/${entry.name}/bin`);
    }
  } catch {
    // No Debian PostgreSQL packages.
  }
  for (const dir of dirs) {
    try {
      if (Deno.statSync(`${dir}/pg_test_fsync`).isFile) return `${dir}/pg_test_fsync`;
    } catch {
      // Not here.
    }
  }
  return "pg_test_fsync";
}

async function measurePostgres(): Promise<void> {
  const cluster = await startPostgres();
  try {
    const data = `${cluster.dir}/data`;
    // Production flush settings (the test cluster turns fsync off for speed).
    await Deno.writeTextFile(
      `${data}/postgresql.auto.conf`,
      "fsync = on\nfull_page_writes = on\n",
      {
        append: true,
      },
    );
    await cluster.pause();
    await cluster.resume();
    const fsyncTest = new Deno.Command(findPgTestFsync(), {
      args: ["-s", "1", "-f", `${cluster.dir}/fsync_test`],
      stdout: "piped",
      stderr: "null",
    });
    try {
      const text = new TextDecoder().decode((await fsyncTest.output()).stdout);
      const line = text.split("\n").find((l) => /^\s*fdatasync\s+[\d.]+ ops\/sec/.test(l));
      console.log(
        `pg_test_fsync, one 8 kB write and fdatasync: ${line?.trim().replace(/\s+/g, " ")}`,
      );
    } catch {
      console.log("pg_test_fsync: not found");
    }
    for (const notifications of [true, false]) {
      const url = await cluster.createDatabase("rc");
      const store = await openPostgresStore(url, {
        durability: "grants",
        maxConnections: IN_FLIGHT,
        notifications,
      });
      const ids = await seedTokens(store);
      const done = revokeAll(store, ids);
      const waits = sampleWaits(url, done);
      const seconds = await done;
      console.log(
        `postgres store, notifications ${notifications ? "on" : "off"}: ${ids.length} ` +
          `revocations, ${IN_FLIGHT} in flight: ${rate(ids.length, seconds)}/s; waits: ${
            formatWaits(await waits)
          }`,
      );
      await store.closeStore();
    }
    await measureShapes(await cluster.createDatabase("rcsql"));
  } finally {
    await cluster.stop();
  }
}

if (which === "sqlite" || which === "both") await measureSqlite();
if (which === "postgres" || which === "both") await measurePostgres();
