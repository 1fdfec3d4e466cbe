/**
 * The bench's "Rates and quotas" section: secure throughput with a limit on every key against
 * servers without, on SQLite (one core) and on PostgreSQL (two instances on one database, each
 * under its own wrk, summed). The limits are the default's (a per-minute rate and a monthly quota
 * high enough never to refuse, so every request is admitted through the limiter's leases), set
 * through the admin CLI on a copy of the same database; the servers with and without limits are
 * warmed, then measured in alternating rounds. Target: ≥ 0.90 of the rate without, p99 at most
 * 0.5 ms worse.
 *
 * @module
 */
import { main as admin } from "../../src/cli/main.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import type { BenchContext, SectionReport } from "./context.ts";
import { formatRatio, type Measured, type Row } from "./report.ts";
import { copySeedToPostgres } from "./seed_postgres.ts";
import type { Server } from "./servers.ts";

const RATIO = "limited/unlimited";
const P99 = "p99 worse by";
const RATE = "1000000000/minute";
const QUOTA = "1000000000000/month";

/** Runs `deno task admin ARGS` in this process against `store`; throws on a failure. */
async function runAdmin(store: string, args: string[]): Promise<void> {
  const hasher = createPasswordHasher({ workers: 1 });
  const out: string[] = [];
  try {
    const where = store.startsWith("postgres") ? "--store" : "--db";
    const code = await admin([...args, where, store], {
      env: { USER: "bench" },
      stdout: (text) => out.push(text),
      stderr: (text) => out.push(text),
      clock: systemClock,
      hasher,
    });
    if (code !== 0) throw new Error(`admin ${args.join(" ")}: ${out.join(" ")}`);
  } finally {
    hasher.close();
  }
}

async function setLimits(store: string): Promise<void> {
  await runAdmin(store, ["limit", "set", "default", "--rate", RATE]);
  await runAdmin(store, ["limit", "set", "default", "--quota", QUOTA]);
}

/** Several servers measured at once (one wrk each): requests summed, the worst p99. */
async function measureAll(ctx: BenchContext, servers: Server[]): Promise<Measured> {
  const results = await Promise.all(
    servers.map((server) => ctx.measure(server, ctx.lua(server.origin, ctx.pairs, "query"))),
  );
  if (results.length === 1) return results[0];
  return {
    ...results[0],
    rps: results.reduce((sum, r) => sum + r.rps, 0),
    requests: results.reduce((sum, r) => sum + r.requests, 0),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
    p50: Math.max(...results.map((r) => r.p50)),
    p99: Math.max(...results.map((r) => r.p99)),
    cpuUsPerRequest: results.reduce((sum, r) => sum + r.cpuUsPerRequest * r.requests, 0) /
      Math.max(1, results.reduce((sum, r) => sum + r.requests, 0)),
    serverCores: results.reduce((sum, r) => sum + r.serverCores, 0),
  };
}

/** Alternating rounds on the servers without limits and on those with, both warmed first. */
async function compare(
  ctx: BenchContext,
  label: string,
  servers: Record<"without" | "with", Server[]>,
): Promise<Record<"without" | "with", Measured>> {
  await measureAll(ctx, servers.without); // warm: caches full
  await measureAll(ctx, servers.with); // warm: caches full, every key holding its slices
  const runs = await ctx.alternate(label, {
    without: () => measureAll(ctx, servers.without),
    with: () => measureAll(ctx, servers.with),
  });
  return runs as Record<"without" | "with", Measured>;
}

function toRows(scenario: string, server: string, runs: Record<"without" | "with", Measured>) {
  const load = "Lua, sampled tokens";
  const worse = runs.with.p99 - runs.without.p99;
  return [
    { scenario, server, load: `${load}, no limits`, result: runs.without },
    {
      scenario,
      server,
      load: `${load}, a rate and a quota on every key`,
      result: runs.with,
      extra: {
        [RATIO]: formatRatio(runs.with, runs.without),
        [P99]: `${worse.toFixed(2)} ms (target ≤ 0.5)`,
      },
    },
  ] satisfies Row[];
}

/** Runs the section (the shared keygate stopped: nothing else runs meanwhile). */
export async function runRateLimitsSection(ctx: BenchContext): Promise<SectionReport> {
  await ctx.stopBigKeygate();
  const rows: Row[] = [];
  ctx.log("rates and quotas: keygate on SQLite, one core");
  const limitedPath = `${ctx.work}/limited.sqlite3`;
  await runAdmin(ctx.sqlitePath, ["db", "backup", limitedPath]);
  await setLimits(limitedPath);
  const started: Server[] = [];
  try {
    const plain = await ctx.startKeygate("keygate-plain", ctx.sqlitePath, ctx.serverCore);
    started.push(plain);
    const limited = await ctx.startKeygate("keygate-limited", limitedPath, ctx.serverCore);
    started.push(limited);
    const runs = await compare(ctx, "rates and quotas, SQLite", {
      without: [plain],
      with: [limited],
    });
    rows.push(...toRows("secure GET, SQLite", "keygate, 1 core", runs));
  } finally {
    for (const server of started.splice(0)) await server.stop().catch(() => {});
  }
  ctx.log("rates and quotas: two keygate instances on one PostgreSQL");
  const cluster = await startPostgres();
  try {
    const plainUrl = await cluster.createDatabase("bench_plain");
    const limitedUrl = await cluster.createDatabase("bench_limits");
    await copySeedToPostgres(ctx.sqlitePath, plainUrl);
    await copySeedToPostgres(ctx.sqlitePath, limitedUrl);
    await setLimits(limitedUrl);
    const servers = { without: [] as Server[], with: [] as Server[] };
    for (const name of ["a", "b"]) {
      const plain = await ctx.startKeygate(`keygate-pg-plain-${name}`, plainUrl, ctx.serverCore);
      started.push(plain);
      servers.without.push(plain);
      const limited = await ctx.startKeygate(
        `keygate-pg-limits-${name}`,
        limitedUrl,
        ctx.serverCore,
      );
      started.push(limited);
      servers.with.push(limited);
    }
    const runs = await compare(ctx, "rates and quotas, PostgreSQL", servers);
    rows.push(...toRows("secure GET, PostgreSQL", "2 keygate instances", runs));
  } finally {
    for (const server of started.splice(0)) await server.stop().catch(() => {});
    await cluster.stop();
  }
  return {
    title: "Rates and quotas",
    intro: "Secure throughput with the default's per-minute rate and monthly quota on every key " +
      "(set high enough never to refuse), against servers on a copy of the database without " +
      "limits, in alternating rounds. " +
      "On PostgreSQL two instances share one database, each under its own wrk (rates summed, the " +
      "worse p99).",
    rows,
    columns: [RATIO, P99],
  };
}
