/**
 * The secure path's cache miss in process, without HTTP: the gate's two SHA-256 digests and the
 * store's grant lookup, `--concurrency` lookups in flight at a time (as many connections' misses
 * would be), on SQLite and on a throwaway PostgreSQL cluster. Prints lookups per second, this
 * process's CPU per lookup and, on PostgreSQL, the database's (its postmaster's process tree): a
 * guide while working on the miss (`deno task bench` judges it).
 *
 *     deno run --allow-all scripts/bench/miss_path.ts [--tokens 20000] [--seconds 5]
 *       [--concurrency 50]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { hashSecret } from "../../src/auth/credentials.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import type { Store } from "../../src/store/store.ts";
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import { readTreeCpuSeconds } from "./proc.ts";
import { seedDatabase } from "./seed.ts";
import { copySeedToPostgres } from "./seed_postgres.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    tokens: { type: "string", default: "20000" },
    seconds: { type: "string", default: "5" },
    concurrency: { type: "string", default: "50" },
  },
});
const TOKENS = Number(values.tokens);
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);

/** This process's user + system CPU seconds. */
function readCpuSeconds(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function run(
  name: string,
  store: Store,
  pairs: { apiKey: string; token: string }[],
  database?: number,
) {
  let next = 0;
  let done = 0;
  let found = 0;
  const lookUp = async () => {
    const { apiKey, token } = pairs[next++ % pairs.length];
    const grant = await store.findTokenGrant({
      tokenHash: hashSecret(token),
      keyHash: hashSecret(apiKey),
      now: Date.now(),
    });
    if (grant !== undefined) found++;
    done++;
  };
  const loop = async (until: number) => {
    while (performance.now() < until) await lookUp();
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, () => loop(performance.now() + 1000)));
  [done, found] = [0, 0];
  const cpu = readCpuSeconds();
  const databaseCpu = database === undefined ? 0 : readTreeCpuSeconds(database);
  const started = performance.now();
  const until = started + SECONDS * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, () => loop(until)));
  const seconds = (performance.now() - started) / 1000;
  const spent = readCpuSeconds() - cpu;
  const databaseSpent = database === undefined ? 0 : readTreeCpuSeconds(database) - databaseCpu;
  if (found !== done) throw new Error(`${name}: ${done - found} lookups found nothing`);
  console.log(
    `${name}: ${(done / seconds).toFixed(0)} lookups/s, ` +
      `${(spent * 1e6 / done).toFixed(1)} µs CPU per lookup in this process` +
      (database === undefined
        ? ""
        : `, ${(databaseSpent * 1e6 / done).toFixed(1)} in the database`),
  );
}

const work = await Deno.makeTempDir({ prefix: "keygate-miss-" });
const cluster = await startPostgres({ alsoRemove: [work] });
try {
  const seeded = await seedDatabase(`${work}/miss.sqlite3`, {
    tokens: TOKENS,
    sample: Math.min(TOKENS, 10_000),
    passwordHash: "unused",
  });
  const url = await cluster.createDatabase("miss");
  await copySeedToPostgres(`${work}/miss.sqlite3`, url);
  const sqlite = openSqliteStore(`${work}/miss.sqlite3`);
  await run("SQLite", sqlite, seeded.sample);
  await sqlite.closeStore();
  const postmaster = Number(
    (await Deno.readTextFile(`${cluster.dir}/data/postmaster.pid`)).split("\n")[0],
  );
  const pg = await openPostgresStore(url);
  await run("PostgreSQL", pg, seeded.sample, postmaster);
  await run("PostgreSQL", pg, seeded.sample, postmaster);
  await pg.closeStore();
} finally {
  await cluster.stop();
}
