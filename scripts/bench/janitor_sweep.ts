/**
 * What one janitor sweep costs on a large token table, on SQLite and on a throwaway PostgreSQL
 * cluster: `--tokens` live tokens, of which about `--ended-percent` ended past retention in each
 * of the four ways a token ends (its expiry, its revocation, its key's revocation, its user's
 * cutoff), beside the history a long-running service piles up (a rotated-away key per live key,
 * 30% of the users cut off once, before their tokens were issued; `--history` rotated-away keys
 * per live key, 1 by default). Each backend runs three sweeps: the first deletes those rows
 * (checked against a count made by the store's own rule before it); the second, by the same
 * janitor, finds nothing left, as most timed sweeps do, looking only at the keys and users that
 * ended since the first; the third, by a new janitor, finds nothing either but looks at every key
 * and user, as a server's first sweep and one a day do. Prints each sweep's time, this process's
 * CPU and, on PostgreSQL, the database's (its postmaster's process tree): a guide while working on
 * the janitor (docs/performance.md, "The janitor's sweep").
 *
 *     deno run --allow-all scripts/bench/janitor_sweep.ts [--tokens 1000000] [--ended-percent 1]
 *       [--history 1]
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { parseArgs } from "node:util";
import { createJanitor, type Janitor } from "../../src/auth/janitor.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { TOKEN_ENDED_AT } from "../../src/store/sqlite/rules.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import type { Store } from "../../src/store/store.ts";
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import { readTreeCpuSeconds } from "./proc.ts";
import { seedDatabase } from "./seed.ts";
import { copySeedToPostgres, runStatements, settleDatabase } from "./seed_postgres.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    tokens: { type: "string", default: "1000000" },
    "ended-percent": { type: "string", default: "1" },
    history: { type: "string", default: "1" },
  },
});
const HISTORY = Number(values.history);
const TOKENS = Number(values.tokens);
const ENDED_PERCENT = Number(values["ended-percent"]);
const DAY = 86_400_000;
/** The janitor's retention in the runs: a day. */
const RETENTION_SECONDS = 86_400;

/** This process's user + system CPU seconds. */
function readCpuSeconds(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** How each backend writes a random 32-byte digest and a numbers source `s(n)` of 1 to `count`. */
interface Dialect {
  digest: (text: string) => string;
  numbers: (count: number) => string;
}

const SQLITE: Dialect = {
  digest: () => "randomblob(32)",
  numbers: (count) =>
    `(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${count})
      SELECT n FROM s)`,
};

const POSTGRES: Dialect = {
  digest: (text) => `sha256(convert_to(${text}, 'UTF8'))`,
  numbers: (count) => `generate_series(1, ${count}) AS s(n)`,
};

/**
 * Statements that end about `ENDED_PERCENT` of the tokens a week ago, a quarter in each way, and
 * write the history a sweep must not pay for: 30% of the users cut off long before their tokens
 * were issued (a password changed once), and a rotated-away key per live key, its tokens long
 * gone. The seed has one user and one key per 100 tokens, with the same ids.
 */
function endingStatements(now: number, dialect: Dialect): string[] {
  const ago = now - 7 * DAY;
  const users = Math.ceil(TOKENS / 100);
  // Of every `every` tokens, one expired and one revoked; of every `every` keys (and users, each
  // with 100 tokens), one revoked (and one cut off): each is a quarter of the ended rows.
  const every = Math.max(10, Math.round(40 / ENDED_PERCENT) * 10);
  return [
    `UPDATE tokens SET issued_at = ${ago - DAY}, expires_at = ${ago} WHERE id % ${every} = 0`,
    `UPDATE tokens SET issued_at = ${ago - DAY}, revoked_at = ${ago} WHERE id % ${every} = 1`,
    `UPDATE api_keys SET created_at = ${ago - DAY}, revoked_at = ${ago} WHERE id % ${every} = 2`,
    `UPDATE users SET tokens_valid_from = ${now + DAY}, updated_at = ${ago}
       WHERE id % ${every} = 3`,
    // History: `every` is a multiple of 10, so these users are none of those above.
    `UPDATE users SET tokens_valid_from = 1, updated_at = ${ago} WHERE id % 10 IN (4, 5, 6)`,
    `INSERT INTO api_keys (key_hash, prefix, user_id, created_at, revoked_at)
       SELECT ${dialect.digest("'old' || n")}, 'old', (n - 1) % ${users} + 1, ${ago - 30 * DAY},
         ${ago - 29 * DAY}
       FROM ${dialect.numbers(users * HISTORY)}`,
  ];
}

async function sweepThrice(name: string, store: Store, expected: number, database?: number) {
  const newJanitor = () =>
    createJanitor({
      store,
      clock: systemClock,
      logger: silentLogger,
      retentionSeconds: RETENTION_SECONDS,
    });
  const first = newJanitor();
  const rounds: [string, Janitor][] = [
    ["first", first],
    ["second (since the first)", first],
    ["third (a new janitor: every key and user)", newJanitor()],
  ];
  for (const [round, janitor] of rounds) {
    const cpu = readCpuSeconds();
    const databaseCpu = database === undefined ? 0 : readTreeCpuSeconds(database);
    const started = performance.now();
    const deleted = await janitor.sweep();
    const seconds = (performance.now() - started) / 1000;
    const spent = readCpuSeconds() - cpu;
    const databaseSpent = database === undefined ? 0 : readTreeCpuSeconds(database) - databaseCpu;
    const want = round === "first" ? expected : 0;
    if (deleted !== want) throw new Error(`${name}: deleted ${deleted} rows, expected ${want}`);
    console.log(
      `${name}, ${round} sweep: ${deleted.toLocaleString("en")} rows deleted in ` +
        `${seconds.toFixed(3)} s, ${spent.toFixed(3)} s CPU in this process` +
        (database === undefined ? "" : `, ${databaseSpent.toFixed(3)} s in the database`),
    );
  }
}

const work = await Deno.makeTempDir({ prefix: "keygate-janitor-" });
const cluster = await startPostgres({ alsoRemove: [work] });
try {
  const path = `${work}/janitor.sqlite3`;
  const started = performance.now();
  await seedDatabase(path, { tokens: TOKENS, sample: 0, issuers: 0, passwordHash: "unused" });
  console.log(
    `seeded ${TOKENS.toLocaleString("en")} tokens in ` +
      `${((performance.now() - started) / 1000).toFixed(0)} s`,
  );
  const url = await cluster.createDatabase("janitor");
  await copySeedToPostgres(path, url);
  const now = Date.now();
  const cutoff = now - RETENTION_SECONDS * 1000;

  const expected = endOnSqlite(path, endingStatements(now, SQLITE), cutoff);
  // As the server opens it: a grant-ending commit waits for a WAL sync (off the thread).
  const sqlite = openSqliteStore(path, { durability: "grants" });
  console.log(`ended past retention: ${expected.toLocaleString("en")} rows`);
  await sweepThrice("SQLite", sqlite, expected);
  await sqlite.closeStore();

  await runStatements(url, endingStatements(now, POSTGRES));
  await settleDatabase(url);
  const postmaster = Number(
    (await Deno.readTextFile(`${cluster.dir}/data/postmaster.pid`)).split("\n")[0],
  );
  const pg = await openPostgresStore(url, { applicationName: "keygate-bench-janitor" });
  await sweepThrice("PostgreSQL", pg, expected, postmaster);
  await pg.closeStore();
} finally {
  await cluster.stop();
}

/** Runs `statements` on the SQLite file; resolves to the rows the store's rule says ended. */
function endOnSqlite(path: string, statements: string[], cutoff: number): number {
  const db = new DatabaseSync(path);
  try {
    for (const statement of statements) db.exec(statement);
    const row = db.prepare(
      `SELECT count(*) AS n FROM tokens t JOIN api_keys k ON k.id = t.api_key_id
         JOIN users u ON u.id = t.user_id
         WHERE ${TOKEN_ENDED_AT} <= ?`,
    ).get(cutoff) as { n: number };
    return Number(row.n);
  } finally {
    db.close();
  }
}
