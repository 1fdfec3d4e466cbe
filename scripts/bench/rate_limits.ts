/**
 * The bench's "Rates and quotas" section: secure throughput with a limit on every key against the
 * same server without, on SQLite (one core) and on PostgreSQL (two instances on one database,
 * each under its own wrk, summed). The limits are the default's (a per-minute rate and a monthly quota
 * high enough never to refuse, so every request is admitted through the limiter's leases), set
 * and removed through the admin CLI between alternating rounds on the same servers: the change
 * is learned at once, so the rounds differ only in the limits. Target: ≥ 0.90 of the rate
 * without, p99 at most 0.5 ms worse.
 *
 * @module
 */
import { main as admin } from "../../src/cli/main.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { startPostgres } from "../../tests/_postgres.ts";
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

async function setLimits(store: string, on: boolean): Promise<void> {
  if (on) {
    await runAdmin(store, ["limit", "set", "default", "--rate", RATE]);
    await runAdmin(store, ["limit", "set", "default", "--quota", QUOTA]);
  } else {
    await runAdmin(store, ["limit", "remove", "default", "minute"]).catch(() => {});
    await runAdmin(store, ["limit", "remove", "default", "quota"]).catch(() => {});
  }
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

/** Alternating rounds with and without the default limits on `store`, served by `servers`. */
async function compare(
  ctx: BenchContext,
  label: string,
  store: string,
  servers: Server[],
): Promise<Record<"without" | "with", Measured>> {
  await setLimits(store, true);
  await measureAll(ctx, servers); // warm: leases sized, caches full
  const runs = await ctx.alternate(label, {
    without: async () => {
      await setLimits(store, false);
      return await measureAll(ctx, servers);
    },
    with: async () => {
      await setLimits(store, true);
      return await measureAll(ctx, servers);
    },
  });
  await setLimits(store, false);
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
  const lite = await ctx.startKeygate("keygate-limits", ctx.sqlitePath, ctx.serverCore);
  try {
    rows.push(
      ...toRows(
        "secure GET, SQLite",
        "keygate, 1 core",
        await compare(ctx, "rates and quotas, SQLite", ctx.sqlitePath, [lite]),
      ),
    );
  } finally {
    await lite.stop();
  }
  ctx.log("rates and quotas: two keygate instances on one PostgreSQL");
  const cluster = await startPostgres();
  const servers: Server[] = [];
  try {
    const url = await cluster.createDatabase("bench_limits");
    await copySeedToPostgres(ctx.sqlitePath, url);
    for (const name of ["keygate-pg-a", "keygate-pg-b"]) {
      servers.push(await ctx.startKeygate(name, url, ctx.serverCore));
    }
    rows.push(
      ...toRows(
        "secure GET, PostgreSQL",
        "2 keygate instances",
        await compare(ctx, "rates and quotas, PostgreSQL", url, servers),
      ),
    );
  } finally {
    for (const server of servers) await server.stop().catch(() => {});
    await cluster.stop();
  }
  return {
    title: "Rates and quotas",
    intro: "Secure throughput with the default's rate and monthly quota on every key (set high " +
      "enough never to refuse), against the same servers without limits, in alternating rounds. " +
      "On PostgreSQL two instances share one database, each under its own wrk (rates summed, the " +
      "worse p99).",
    rows,
    columns: [RATIO, P99],
  };
}
