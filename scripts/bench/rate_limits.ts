/**
 * The bench's "Rates and quotas" section: secure throughput with a limit on every key against
 * servers without, on SQLite (one core) and on PostgreSQL (two instances on one database, each
 * under its own wrk, summed). The limits are the default's (a per-minute rate and a monthly quota
 * high enough never to refuse, so every request is admitted through the limiter's leases), set
 * through the admin CLI on a copy of the same database; the servers with and without limits are
 * warmed, then measured in alternating rounds. Target: ≥ 0.90 of the rate without, p99 at most
 * 0.5 ms worse. Every server serves its metrics (both sides alike), so that the notes can say
 * what the leases did in each run with limits: calls and keys leased per 1,000 requests, and
 * requests that waited for one.
 *
 * @module
 */
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import type { BenchContext, SectionReport } from "./context.ts";
import { runAdmin, setBenchLimits } from "./limits_admin.ts";
import { formatRatio, type Measured, type Row } from "./report.ts";
import { copySeedToPostgres } from "./seed_postgres.ts";
import type { Server } from "./servers.ts";

const RATIO = "limited/unlimited";
const P99 = "p99 worse by";

/** Every server of the section serves its metrics (the lease counters), on a port of its own. */
const METRICS = ["--metrics", "on", "--metrics-port", "0"];
const METRICS_AT = /metrics on http:\/\/[^:]+:(\d+)\/metrics/;

/** The lease counters of the limited servers, summed. */
interface LeaseCounts {
  leases: number;
  keys: number;
  waits: number;
}

/** The bytes of a server's log read for its metrics port, logged as it starts. */
const LOG_HEAD_BYTES = 64 * 1024;

/**
 * A server's metrics port, from the start of its log: the whole log is not read, as every
 * request is logged (`--log-level info`) and a run's log can outgrow the longest string.
 */
async function readMetricsPort(ctx: BenchContext, server: Server): Promise<string> {
  using file = await Deno.open(`${ctx.work}/${server.name}.log`);
  const head = new Uint8Array(LOG_HEAD_BYTES);
  let read = 0;
  while (read < head.length) {
    const n = await file.read(head.subarray(read));
    if (n === null) break;
    read += n;
  }
  const port = METRICS_AT.exec(new TextDecoder().decode(head.subarray(0, read)))?.[1];
  if (port === undefined) throw new Error(`${server.name}: no metrics listener in its log`);
  return port;
}

async function readLeaseCounts(ctx: BenchContext, servers: Server[]): Promise<LeaseCounts> {
  const sum = { leases: 0, keys: 0, waits: 0 };
  for (const server of servers) {
    const port = await readMetricsPort(ctx, server);
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
    sum.leases += read("keygate_limit_leases_total");
    sum.keys += read("keygate_limit_leased_keys_total");
    sum.waits += read("keygate_limit_lease_waits_total");
  }
  return sum;
}

/**
 * Measures the limited servers, and notes what their leases did meanwhile: store calls and keys
 * leased per 1,000 requests, keys per call, requests that waited for a lease.
 */
async function measureLeases(
  ctx: BenchContext,
  label: string,
  servers: Server[],
  seconds?: number,
): Promise<Measured & { keysLeasedPer1000: number }> {
  const before = await readLeaseCounts(ctx, servers);
  const result = await measureAll(ctx, servers, seconds);
  const after = await readLeaseCounts(ctx, servers);
  const per1000 = (n: number) => (n * 1000 / Math.max(1, result.requests)).toFixed(1);
  const calls = after.leases - before.leases;
  const keys = after.keys - before.keys;
  ctx.notes.push(
    `${label} (${new Date().toISOString().slice(11, 19)} UTC, ${result.requests} requests): ` +
      `${per1000(calls)} lease calls and ${per1000(keys)} keys leased per 1,000 requests ` +
      `(${(keys / Math.max(1, calls)).toFixed(1)} keys a call), ` +
      `${per1000(after.waits - before.waits)} requests per 1,000 waited for a lease.`,
  );
  return Object.assign(result, { keysLeasedPer1000: keys * 1000 / Math.max(1, result.requests) });
}

/** Warm-ups of the limited servers beyond the first, at most, while their keys are still leasing. */
const MORE_WARM_UPS = 4;

/**
 * Warms the limited servers until a warm-up leases almost nothing (under 1 key per 1,000
 * requests), or {@link MORE_WARM_UPS} more runs have: two instances lease 10,000 keys in batches,
 * and rounds measured while they still lease say more about the warm-up than about the limiter.
 */
async function warmLeases(
  ctx: BenchContext,
  label: string,
  servers: Server[],
  seconds?: number,
): Promise<void> {
  for (let run = 0; run <= MORE_WARM_UPS; run++) {
    const warm = await measureLeases(ctx, `${label}, warm-up ${run + 1}`, servers, seconds);
    if (warm.keysLeasedPer1000 < 1) break;
  }
}

/**
 * Several servers measured at once (one wrk each, `seconds` long or the run's duration): requests
 * summed, the worst p99.
 */
async function measureAll(
  ctx: BenchContext,
  servers: Server[],
  seconds?: number,
): Promise<Measured> {
  const more = seconds === undefined ? {} : { duration: seconds };
  const results = await Promise.all(
    servers.map((server) => ctx.measure(server, ctx.lua(server.origin, ctx.pairs, "query"), more)),
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

type Side = "without" | "with" | "quiet";

/** The limits' shortest window: the section's rate is per minute. */
const WINDOW_MS = 60_000;
/** A limited side serves at least this long, unmeasured, before each of its rounds. */
const MIN_SERVE_MS = 5_000;
/** Where in the minute the first limited round begins (clear of the boundary itself). */
const PHASE_OFFSET_MS = 2_500;

/**
 * Where in the minute a limited side's round `round` (from 1) of `rounds` begins: evenly spaced
 * over the minute, the same for every side, so that each side's rounds sample the minute alike
 * (the leases ahead of a boundary fall in its last 15 s: limit_ahead.ts, `AHEAD_SPREAD_MS`).
 */
function toRoundPhase(round: number, rounds: number): number {
  return (Math.round((round - 1) * WINDOW_MS / rounds) + PHASE_OFFSET_MS) % WINDOW_MS;
}

/** How long from `now` until the minute next reaches `phase`. */
const untilPhase = (now: number, phase: number) =>
  (phase - now % WINDOW_MS + WINDOW_MS) % WINDOW_MS;

/** How long from `now` until the minute reaches `phase`, at least {@link MIN_SERVE_MS}. */
function toPhaseWait(now: number, phase: number): number {
  const wait = untilPhase(now, phase);
  return wait < MIN_SERVE_MS ? wait + WINDOW_MS : wait;
}

/**
 * One limited side's rounds. The rounds alternate, so each server would rest while the others
 * run; but a server with per-minute limits behaves by where it is in the minute and by whether it
 * served up to then (a serving server leases each key's next window ahead at its own moment of a
 * boundary's last 15 s, a rested one leased nothing ahead and leases all its keys at once when it
 * resumes). With three sides of about 11 s a round, each side also kept nearly one phase from
 * minute to minute, so one side's median round fell inside the spread and another's never. So a
 * limited side serves (the same load, unmeasured, noted like every run) from when its turn comes
 * until its round's phase ({@link toRoundPhase}, at least {@link MIN_SERVE_MS}), and its round
 * begins with no rest, at the same phases for every side; a boundary or spread inside a round is
 * measured.
 */
function limitedRounds(ctx: BenchContext, label: string, servers: Server[]) {
  let round = 0;
  return async (): Promise<Measured> => {
    round++;
    const phase = toRoundPhase(round, ctx.rounds);
    const seconds = Math.floor(toPhaseWait(Date.now(), phase) / 1000);
    await measureLeases(ctx, `${label}, round ${round}, serving until its phase`, servers, seconds);
    // wrk stops on a whole second: under a second may be left (a short rest), or the phase may
    // have just passed (then the round begins at once).
    const left = untilPhase(Date.now(), phase);
    if (left < 1_000) await new Promise((resolve) => setTimeout(resolve, left));
    return await measureLeases(ctx, `${label}, round ${round}`, servers);
  };
}

/**
 * Alternating rounds on the servers without limits and on those with (and, where given, with
 * limits and their RateLimit headers off), all warmed first.
 */
async function compare(
  ctx: BenchContext,
  label: string,
  servers: { without: Server[]; with: Server[]; quiet?: Server[] },
): Promise<Partial<Record<Side, Measured>> & Record<"without" | "with", Measured>> {
  await measureAll(ctx, servers.without); // warm: caches full
  // Warm: caches full, and the sampled keys leased (warm-ups repeat while they still lease).
  await warmLeases(ctx, `${label}, with limits`, servers.with);
  const quiet = servers.quiet;
  if (quiet !== undefined) await warmLeases(ctx, `${label}, with limits, headers off`, quiet);
  const runs = await ctx.alternate(label, {
    without: () => measureAll(ctx, servers.without),
    with: limitedRounds(ctx, `${label}, with limits`, servers.with),
    ...(quiet === undefined ? {} : {
      quiet: limitedRounds(ctx, `${label}, with limits, headers off`, quiet),
    }),
  });
  return runs as Partial<Record<Side, Measured>> & Record<"without" | "with", Measured>;
}

function toRows(
  scenario: string,
  server: string,
  runs: Partial<Record<Side, Measured>> & Record<"without" | "with", Measured>,
) {
  const load = "Lua, sampled tokens";
  const limited = (result: Measured) => ({
    [RATIO]: formatRatio(result, runs.without),
    [P99]: `${(result.p99 - runs.without.p99).toFixed(2)} ms (target ≤ 0.5)`,
  });
  return [
    { scenario, server, load: `${load}, no limits`, result: runs.without },
    {
      scenario,
      server,
      load: `${load}, a rate and a quota on every key`,
      result: runs.with,
      extra: limited(runs.with),
    },
    ...(runs.quiet === undefined ? [] : [{
      scenario,
      server,
      load: `${load}, the same limits, --limit-headers off`,
      result: runs.quiet,
      extra: limited(runs.quiet),
    }]),
  ] satisfies Row[];
}

/** Runs the section (the shared keygate stopped: nothing else runs meanwhile). */
export async function runRateLimitsSection(ctx: BenchContext): Promise<SectionReport> {
  await ctx.stopBigKeygate();
  const rows: Row[] = [];
  ctx.log("rates and quotas: keygate on SQLite, one core");
  const limitedPath = `${ctx.work}/limited.sqlite3`;
  await runAdmin(ctx.sqlitePath, ["db", "backup", limitedPath]);
  await setBenchLimits(limitedPath);
  // Its own copy, so that no server shares its file with another (a second process on a file
  // costs the first a look at the change record after each of its commits).
  const quietPath = `${ctx.work}/limited-quiet.sqlite3`;
  await runAdmin(ctx.sqlitePath, ["db", "backup", quietPath]);
  await setBenchLimits(quietPath);
  const started: Server[] = [];
  try {
    const plain = await ctx.startKeygate("keygate-plain", ctx.sqlitePath, ctx.serverCore, METRICS);
    started.push(plain);
    const limited = await ctx.startKeygate("keygate-limited", limitedPath, ctx.serverCore, METRICS);
    started.push(limited);
    // The same limits without the two RateLimit fields: what the fields cost on their own (a
    // limited answer with them leaves in two writes on Deno 2.9: docs/performance.md).
    const quiet = await ctx.startKeygate("keygate-limited-quiet", quietPath, ctx.serverCore, [
      ...METRICS,
      ...["--limit-headers", "off"],
    ]);
    started.push(quiet);
    const runs = await compare(ctx, "rates and quotas, SQLite", {
      without: [plain],
      with: [limited],
      quiet: [quiet],
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
    // As on SQLite, the same limits without the RateLimit fields, on a database of their own.
    const quietUrl = await cluster.createDatabase("bench_limits_quiet");
    await copySeedToPostgres(ctx.sqlitePath, plainUrl);
    await copySeedToPostgres(ctx.sqlitePath, limitedUrl);
    await copySeedToPostgres(ctx.sqlitePath, quietUrl);
    await setBenchLimits(limitedUrl);
    await setBenchLimits(quietUrl);
    const servers = { without: [] as Server[], with: [] as Server[], quiet: [] as Server[] };
    for (const name of ["a", "b"]) {
      const plain = await ctx.startKeygate(
        `keygate-pg-plain-${name}`,
        plainUrl,
        ctx.serverCore,
        METRICS,
      );
      started.push(plain);
      servers.without.push(plain);
      const limited = await ctx.startKeygate(
        `keygate-pg-limits-${name}`,
        limitedUrl,
        ctx.serverCore,
        METRICS,
      );
      started.push(limited);
      servers.with.push(limited);
      const quiet = await ctx.startKeygate(
        `keygate-pg-limits-quiet-${name}`,
        quietUrl,
        ctx.serverCore,
        [...METRICS, ...["--limit-headers", "off"]],
      );
      started.push(quiet);
      servers.quiet.push(quiet);
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
      "worse p99). On both, a third side has the same limits with --limit-headers off.",
    rows,
    columns: [RATIO, P99],
  };
}
