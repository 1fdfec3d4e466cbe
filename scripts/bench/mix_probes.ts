/**
 * What the production mix (production_mix.ts) reads of instance A: its grant-cache counters and
 * change-delay histogram from /metrics, and the revocation-to-refusal probes made with A idle
 * (on PostgreSQL also with the listeners' connections cut).
 *
 * @module
 */
import postgres from "postgres";
import { percentile } from "./revocation.ts";
import { probeDelays } from "./mix_traffic.ts";
import type { Server } from "./servers.ts";

/** What the idle probes run against: A and B of one backend, and the probes' grants. */
export interface ProbedRun {
  backend: string;
  a: Server;
  b: Server;
  client: Deno.HttpClient;
  /** A's metrics port. */
  metricsPort: number;
  probes: { apiKey: string; token: string }[];
}

/** Probes made with A idle (no wrk, no revoker): the protocol's delay without A's queue. */
const IDLE_PROBES = 20;
/** Probes made right after cutting the PostgreSQL listeners' connections. */
const CUT_PROBES = 5;

/**
 * Revocation to refusal on A with A idle, where the rows' probe includes the time A's request
 * waits behind wrk's; on PostgreSQL also with the listeners' connections cut just before each
 * revocation (the poll, not a notification, must then bring the change: ≤ 1 s).
 */
export async function measureIdleDelays(ctx: { notes: string[] }, run: ProbedRun, store: string) {
  const stop = { now: false };
  const common = { stop, client: run.client, a: run.a.origin, b: run.b.origin, everyMs: 50 };
  let before = await readCacheCounters(run.client, run.metricsPort);
  const idle = await probeDelays({ ...common, probes: run.probes, count: IDLE_PROBES });
  let after = await readCacheCounters(run.client, run.metricsPort);
  ctx.notes.push(
    `Production mix, ${run.backend}: revocation to refusal on A with A idle (no wrk load): ` +
      formatDelays(idle) + formatLearned(before.delayBuckets, after.delayBuckets) +
      (after.listening === undefined
        ? ""
        : `; A heard ${after.notifications - before.notifications} notifications for ` +
          `${idle.length} revocations, its listener ${after.listening ? "up" : "DOWN"} after`),
  );
  if (!/^postgres/.test(store)) return;
  const sql = postgres(store, { max: 1, onnotice: () => {} });
  try {
    before = after;
    const cut = await probeDelays({
      ...common,
      probes: run.probes,
      count: CUT_PROBES,
      // Both instances' listeners (they share an application_name); B learns its own commits
      // without one.
      async beforeRevoking() {
        await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name LIKE '%-listener' AND pid <> pg_backend_pid()`;
      },
    });
    after = await readCacheCounters(run.client, run.metricsPort);
    ctx.notes.push(
      `Production mix, ${run.backend}: the same with the listeners' connections cut just ` +
        `before each revocation (A learns it by its poll): ${formatDelays(cut)}` +
        formatLearned(before.delayBuckets, after.delayBuckets),
    );
  } finally {
    await sql.end();
  }
}

/** Probe delays as `N probes: p50 …, p99 …, max …`. */
export function formatDelays(delays: number[]): string {
  if (delays.length === 0) return "no probe made";
  const ms = (n: number) => `${n.toFixed(1)} ms`;
  return `${delays.length} probes: p50 ${ms(percentile(delays, 50))}, ` +
    `p99 ${ms(percentile(delays, 99))}, max ${ms(Math.max(...delays))}`;
}

/**
 * What A's change-delay histogram says of the row (PostgreSQL): from each change's commit, by the
 * database's clock, to A having learned it, without the time a probe's request waits in A's queue.
 */
export function formatLearned(before: Map<number, number>, after: Map<number, number>): string {
  const total = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0);
  const [p50, p99] = [50, 99].map((p) => bucketPercentile(before, after, p));
  if (p50 === undefined || p99 === undefined) return "";
  const ms = (s: number) => s === Infinity ? "> 2.5 s" : `≤ ${+(s * 1000).toFixed(1)} ms`;
  return `; commit to learned on A (its /metrics, ${total} changes): p50 ${ms(p50)}, ` +
    `p99 ${ms(p99)}`;
}

/**
 * A's grant-cache hits and misses, its change-delay histogram, on PostgreSQL the notifications it
 * received and whether its listener is up, and its limiter's lease counters, from its /metrics
 * (plain HTTP, else HTTPS).
 */
export async function readCacheCounters(client: Deno.HttpClient, port: number) {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`, { client }).catch(() =>
    fetch(`https://127.0.0.1:${port}/metrics`, { client })
  );
  const text = await response.text();
  const value = (result: string) =>
    Number(
      new RegExp(`keygate_cache_lookups_total\\{cache="grant",result="${result}"\\} (\\S+)`)
        .exec(text)?.[1] ?? NaN,
    );
  // The change-delay histogram (PostgreSQL): cumulative counts by upper bound, in seconds.
  const delayBuckets = new Map<number, number>();
  for (
    const match of text.matchAll(
      /^keygate_store_change_delay_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm,
    )
  ) {
    delayBuckets.set(match[1] === "+Inf" ? Infinity : Number(match[1]), Number(match[2]));
  }
  // PostgreSQL: notifications received, polls of the change record and the rows they read, and
  // the listener's state (NaN and undefined on SQLite).
  const gauge = (name: string) =>
    Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
  const up = gauge("keygate_store_listener_up");
  return {
    hits: value("hit"),
    misses: value("miss"),
    delayBuckets,
    notifications: gauge("keygate_store_notifications_total"),
    polls: gauge("keygate_store_change_polls_total"),
    rowsRead: gauge("keygate_store_change_rows_total"),
    listening: Number.isNaN(up) ? undefined : up === 1,
    // The limiter's store calls, keys leased and requests that waited for a lease (0 without
    // limits).
    leaseCalls: gauge("keygate_limit_leases_total"),
    leasedKeys: gauge("keygate_limit_leased_keys_total"),
    leaseWaits: gauge("keygate_limit_lease_waits_total"),
  };
}

/**
 * The `p`th percentile of the change delays observed between two scrapes, as the upper bound of
 * its histogram bucket ("≤ 5 ms"), or undefined when none was observed.
 */
function bucketPercentile(
  before: Map<number, number>,
  after: Map<number, number>,
  p: number,
): number | undefined {
  const bounds = [...after.keys()].sort((x, y) => x - y);
  const count = (bound: number) => (after.get(bound) ?? 0) - (before.get(bound) ?? 0);
  const total = count(Infinity);
  if (!(total > 0)) return undefined;
  return bounds.find((bound) => count(bound) >= p / 100 * total);
}
