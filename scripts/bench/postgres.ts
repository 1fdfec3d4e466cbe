/**
 * The benchmark's "PostgreSQL beside SQLite" section: keygate on SQLite and on PostgreSQL, same
 * data, same run, alternating rounds (see docs/performance.md, "Methodology"):
 *
 * - secure GET with a warm cache (fixed URL, and Lua over the sample tokens): PG/SQLite rate;
 * - secure GET with every request a cache miss (`--grant-cache-size 0`): rate and p99;
 * - revocation through instance A seen by instance B, with notifications and with
 *   `--store-listen off` (poll only): p50, p99, max;
 * - issuance (JSON, one core) on both, as a fraction of the measured password-hash limit.
 *
 * PostgreSQL is a throwaway cluster (tests/_helpers/postgres_cluster.ts: initdb and pg_ctl in a temp dir, on
 * 127.0.0.1), with fsync and full-page writes back on for the measurements, pinned to the
 * servers' core; its CPU (every process of the cluster, from /proc) is reported per request
 * beside keygate's. The cluster's database and what the measurements share over it are in
 * postgres_rig.ts.
 *
 * @module
 */
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import { pinTree } from "./proc.ts";
import type { BenchContext, SectionReport } from "./context.ts";
import { findInvalidRun, formatCpuRatio, formatRatio, type Measured } from "./report.ts";
import { formatRevocations, measureRevocations } from "./revocation.ts";
import {
  createPgBench,
  NOTE,
  type PgBench,
  prepareDatabase,
  RATIO,
  readVersion,
  SETTINGS,
  TARGET,
} from "./postgres_rig.ts";
import type { Server } from "./servers.ts";
import { settleDatabase } from "./seed_postgres.ts";

/** Runs the section (with the shared keygate stopped: nothing else runs meanwhile). */
export async function runPostgresSection(ctx: BenchContext): Promise<SectionReport> {
  await ctx.stopBigKeygate();
  const needed = 2 * (ctx.revocations + 1) + 1;
  if (ctx.sample.length < needed) {
    throw new Error(`the PostgreSQL section needs --sample ${needed} or more (--revocations)`);
  }
  ctx.log("starting a throwaway PostgreSQL cluster");
  const cluster = await startPostgres();
  const servers: Server[] = [];
  try {
    const { url, copySeconds, postmaster, pinned } = await prepareDatabase(ctx, cluster);
    const pgVersion = await readVersion(url);
    const bench = createPgBench(ctx, {
      url,
      postmaster,
      pinned,
      servers,
      createDatabase: (name) => cluster.createDatabase(name),
    });
    await measureIssuance(bench, await measureWarm(bench));
    await measureMiss(bench);
    const revocationLines = await measureRevocation(bench);
    const tokens = `${ctx.tokens.toLocaleString("en")} tokens`;
    const settings = Object.entries(SETTINGS).map(([k, v]) => `${k} = ${v}`).join(", ");
    ctx.notes.push(
      `PostgreSQL: ${pgVersion}, a throwaway cluster on 127.0.0.1 (TCP, no TLS), ${settings}, ` +
        `otherwise defaults; ${
          pinned ? `pinned to core ${ctx.serverCore} with keygate` : "not pinned"
        }; ${tokens} copied from the SQLite seed (then vacuumed and checkpointed) in ${
          copySeconds.toFixed(0)
        } s.`,
    );
    return {
      title: "PostgreSQL beside SQLite",
      intro:
        `keygate on SQLite and on PostgreSQL (${pgVersion}) with the same ${tokens}, pinned to the same core (but in the one row that says otherwise); "database" is the CPU of every PostgreSQL process per request, on top of keygate's.`,
      rows: bench.rows,
      columns: [RATIO, TARGET, NOTE],
      after:
        `Revocation through instance A seen by instance B (two keygate processes on one database; from A's
204 to B's first 401, B asked one request at a time):

${revocationLines.join("\n")}`,
    };
  } finally {
    for (const server of [...servers]) await server.stop().catch(() => {});
    await cluster.stop();
  }
}

const sampleLoad = (ctx: BenchContext) => `Lua, ${ctx.sample.length.toLocaleString("en")} tokens`;
const tokensOf = (ctx: BenchContext) => `${ctx.tokens.toLocaleString("en")} tokens`;

/** Secure GET with a warm cache, fixed URL and Lua, on both backends. */
async function measureWarm(bench: PgBench): Promise<{ onSqlite: Server; pgServer: Server }> {
  const { ctx, url, start, measure, fixed, lua } = bench;
  // --- Warm cache ----------------------------------------------------------------------
  const onSqlite = await start("keygate-sqlite", ctx.sqlitePath);
  const pgServer = await start("keygate-pg", url);
  ctx.log("warming up keygate on SQLite and on PostgreSQL");
  for (const server of [onSqlite, pgServer]) {
    await measure(server, lua(server, ctx.pairs, "query"), { duration: 2 });
  }
  const warm = await ctx.alternate("PostgreSQL beside SQLite, warm cache", {
    "SQLite, fixed": () => measure(onSqlite, fixed(onSqlite)),
    "PostgreSQL, fixed": () => measure(pgServer, fixed(pgServer)),
    "SQLite, lua": () => measure(onSqlite, lua(onSqlite, ctx.pairs, "query")),
    "PostgreSQL, lua": () => measure(pgServer, lua(pgServer, ctx.pairs, "query")),
  });
  const tokens = tokensOf(ctx);
  const warmTarget = (pg: Measured, lite: Measured) =>
    findInvalidRun(pg, lite) === undefined
      ? `≥ 0.90: ${pg.rps / lite.rps >= 0.9 ? "met" : "missed"}`
      : "≥ 0.90";
  for (const [suffix, load] of [["fixed", "fixed URL"], ["lua", sampleLoad(ctx)]] as const) {
    const lite = warm[`SQLite, ${suffix}`];
    const pg = warm[`PostgreSQL, ${suffix}`];
    bench.pair(`secure GET, warm cache, ${tokens}`, load, lite, pg, warmTarget(pg, lite));
  }
  return { onSqlite, pgServer };
}

/**
 * Token issuance on one core, on both backends (the servers of {@link measureWarm}, stopped
 * after), against the password-hash limit.
 */
async function measureIssuance(
  bench: PgBench,
  { onSqlite, pgServer }: { onSqlite: Server; pgServer: Server },
): Promise<void> {
  const { ctx, measure, lua } = bench;
  // --- Issuance, one core ----------------------------------------------------------------
  // The password-hash limit (PostgreSQL idle on the same core) is measured in every round
  // beside the issuance runs, so that a slow spell of the machine falls on it too: one
  // measurement before them made every ratio depend on that one moment. The third run moves
  // PostgreSQL to the other core (wrk's, which issuance leaves idle), as on a host of its own:
  // what is left on keygate's core is keygate's own work, so that run tells whether the
  // database, rather than hashing, limits issuance.
  const issue = async (server: Server) => {
    await ctx.settle();
    return await measure(server, lua(server, ctx.issuerPairs, "issue-json"), {
      connections: 4,
    });
  };
  const hashLimit = async (): Promise<Measured> => {
    await ctx.settle(); // as before every issuance run: the last run's logins end first
    const started = performance.now();
    const rps = await ctx.hashRate(ctx.serverCore);
    const seconds = (performance.now() - started) / 1000;
    return {
      rps,
      p50: 0,
      p99: 0,
      requests: 0,
      errors: 0,
      seconds,
      generatorShare: 0,
      cpuUsPerRequest: 0,
      serverCores: 0,
    };
  };
  const apart = ctx.otherCore !== undefined && bench.pinned;
  const issuance = await ctx.alternate("PostgreSQL beside SQLite, issuance", {
    "hash limit, hashes/s as req/s (no wrk)": hashLimit,
    "SQLite, issue": () => issue(onSqlite),
    "PostgreSQL, issue": () => issue(pgServer),
    ...(apart
      ? {
        "PostgreSQL on the other core, issue": async () => {
          if (!await pinTree(bench.postmaster, ctx.otherCore)) {
            throw new Error(`cannot pin PostgreSQL to core ${ctx.otherCore}`);
          }
          try {
            return await issue(pgServer);
          } finally {
            await pinTree(bench.postmaster, ctx.serverCore);
          }
        },
      }
      : {}),
  });
  const hashes = issuance["hash limit, hashes/s as req/s (no wrk)"].rps;
  const issuers = [
    ["SQLite", "keygate on SQLite"],
    ["PostgreSQL", "keygate on PostgreSQL"],
    ...(apart
      ? [[
        "PostgreSQL on the other core",
        `keygate on PostgreSQL (PostgreSQL on core ${ctx.otherCore})`,
      ]]
      : []),
  ];
  for (const [name, server] of issuers) {
    const result = issuance[`${name}, issue`];
    const share = result.rps / hashes;
    bench.rows.push({
      scenario: "token issuance, JSON, 1 core",
      server,
      load: "Lua, 4 connections",
      result,
      extra: {
        [NOTE]: `${share.toFixed(2)} of ${hashes.toFixed(0)} hashes/s (the rounds' median limit)`,
        [TARGET]: `≥ 0.85 of the hash limit: ${share >= 0.85 ? "met" : "missed"}`,
      },
    });
  }
  await bench.stop(onSqlite, pgServer);
}

/** Secure GET with every request a cache miss (`--grant-cache-size 0`), on both backends. */
async function measureMiss(bench: PgBench): Promise<void> {
  const { ctx, url, start, measure, lua } = bench;
  // --- Every request a cache miss --------------------------------------------------------
  const noCache = ["--grant-cache-size", "0"];
  const missSqlite = await start("keygate-sqlite-nocache", ctx.sqlitePath, noCache);
  const missPostgres = await start("keygate-pg-nocache", url, noCache);
  ctx.log("warming up keygate without a grant cache");
  for (const server of [missSqlite, missPostgres]) {
    await measure(server, lua(server, ctx.pairs, "query"), { duration: 2 });
  }
  const before = await startBaselineMiss(bench, noCache);
  const miss = await ctx.alternate("PostgreSQL beside SQLite, every request a miss", {
    "SQLite, miss": () => measure(missSqlite, lua(missSqlite, ctx.pairs, "query")),
    "PostgreSQL, miss": () => measure(missPostgres, lua(missPostgres, ctx.pairs, "query")),
    ...(before === undefined ? {} : {
      "PostgreSQL at the baseline, miss": () =>
        measure(before.server, lua(before.server, ctx.pairs, "query")),
    }),
  });
  const scenario = `secure GET, every request a cache miss (--grant-cache-size 0), ${
    tokensOf(ctx)
  }`;
  bench.pair(scenario, sampleLoad(ctx), miss["SQLite, miss"], miss["PostgreSQL, miss"]);
  if (before !== undefined) {
    const base = miss["PostgreSQL at the baseline, miss"];
    const now = miss["PostgreSQL, miss"];
    bench.rows.push({
      scenario,
      server: `keygate on PostgreSQL at the baseline, ${before.label}`,
      load: sampleLoad(ctx),
      result: base,
      extra: {
        [NOTE]: `today: ${formatRatio(now, base, "×")} this rate, ` +
          `${formatCpuRatio(base, now)}× less keygate CPU per request`,
        [TARGET]: `≥ 2× the baseline: ${
          findInvalidRun(now, base) === undefined
            ? now.rps >= 2 * base.rps ? "met" : "missed"
            : "not judged (an invalid run)"
        }`,
      },
    });
  }
  await bench.stop(missSqlite, missPostgres, ...(before === undefined ? [] : [before.server]));
}

/**
 * With `--baseline`: the baseline revision's keygate, without a cache, on a database of its own
 * (the same seed, its own migrations), warmed up like today's.
 */
async function startBaselineMiss(
  bench: PgBench,
  noCache: string[],
): Promise<{ server: Server; label: string } | undefined> {
  const { ctx } = bench;
  const baseline = ctx.baseline;
  if (baseline === undefined) return undefined;
  ctx.log(`copying the seed for the baseline ${baseline.label}`);
  const url = await bench.createDatabase("bench_baseline");
  await baseline.copySeedToPostgres(ctx.sqlitePath, url);
  // The revision's own copy may not settle its database; this one does, as for the others.
  await settleDatabase(url);
  const server = await ctx.startKeygate(
    "keygate-pg-nocache-baseline",
    url,
    ctx.serverCore,
    noCache,
    { from: baseline },
  );
  bench.servers.push(server);
  bench.onPostgres(server);
  await bench.measure(server, bench.lua(server, ctx.pairs, "query"), { duration: 2 });
  return { server, label: baseline.label };
}

/** Revocation through instance A seen by instance B, with notifications and polling only. */
async function measureRevocation(bench: PgBench): Promise<string[]> {
  const { ctx, url, start } = bench;
  // --- Revocation seen by the other instance ---------------------------------------------
  const revocationLines: string[] = [];
  const fresh = ctx.sample.slice(-2 * (ctx.revocations + 1)); // each token revoked once
  for (
    const [mode, extra, target, maxPauseMs] of [
      ["notifications (LISTEN/NOTIFY)", [], 10, 50],
      [
        "listener off (`--store-listen off`, poll every 500 ms)",
        ["--store-listen", "off"],
        1000,
        500,
      ],
    ] as const
  ) {
    const a = await start("keygate-pg-a", url, [...extra]);
    const b = await start("keygate-pg-b", url, [...extra]);
    ctx.log(`revocation from A seen by B, ${mode}: ${ctx.revocations} tokens`);
    const entries = fresh.splice(0, ctx.revocations + 1);
    // The first one only warms both up (connections, listener); it is not counted.
    const common = { a: a.origin, b: b.origin, caCert: ctx.cert, maxPauseMs };
    await measureRevocations({ ...common, entries: entries.slice(0, 1) });
    const result = await measureRevocations({ ...common, entries: entries.slice(1) });
    revocationLines.push(`- ${mode}: ${formatRevocations(result, target)}`);
    await bench.stop(a, b);
  }

  return revocationLines;
}
