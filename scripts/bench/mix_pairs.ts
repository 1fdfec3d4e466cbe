/**
 * The production mix's pairs of instances (production_mix.ts): A under wrk's load and B taking
 * the revocations, on one store; the victims split between the pair without limits and the pair
 * with; and the warm-up each pair gets before the rows.
 *
 * @module
 */
import { findFreePort } from "../../tests/_helpers/free_port.ts";
import type { BenchContext } from "./context.ts";
import { runAdmin } from "./limits_admin.ts";
import { readCacheCounters } from "./mix_probes.ts";
import { ZIPF_ALPHA } from "./mix_seed.ts";
import { listRevocations, type Revocation, REVOKER_CLIENTS, type Victim } from "./mix_traffic.ts";
import type { SeedEntry } from "./seed.ts";
import type { Server } from "./servers.ts";
import type { Load } from "./wrk.ts";

/** What starting and warming a pair needs from the section's context. */
export type PairContext = Pick<
  BenchContext,
  "serverCore" | "otherCore" | "cert" | "duration" | "measure" | "startKeygate" | "log" | "notes"
>;

/** The grants a pair of instances ends and probes. */
export interface MixTraffic {
  revocations: Generator<Revocation>;
  probes: { apiKey: string; token: string }[];
}

/** What one pair's rows run against: A under load, B taking the revocations. */
export interface MixRun extends MixTraffic {
  backend: string;
  a: Server;
  b: Server;
  client: Deno.HttpClient;
  /** The revoker's clients (mix_traffic.ts, REVOKER_CLIENTS). */
  revokerClients: Deno.HttpClient[];
  /** A's metrics port, B's admin origin and a write operator's token there. */
  metricsPort: number;
  adminOrigin: string;
  operator: string;
  load: Load;
  issuers: SeedEntry[];
}

/** Where a pair runs and what it serves. */
export interface PairOptions extends MixTraffic {
  backend: string;
  store: string;
  /** wrk's token list (mix_seed.ts). */
  pairs: string;
  issuers: SeedEntry[];
  /** Added to the servers' names (`mix-a-limits`). */
  suffix?: string;
  /** Deno flags of A (`--mix-a-flags`). */
  denoFlags?: string[];
  /** keygate flags of A and B besides those the pair sets (`--limit-headers off`). */
  extra?: string[];
  /** A's core (default `ctx.serverCore`; the pair whose A is never measured: `ctx.otherCore`). */
  aCore?: string;
}

/** Starts A and B on `options.store`, with a write operator on B's admin API. */
export async function startPair(ctx: PairContext, options: PairOptions): Promise<MixRun> {
  const suffix = options.suffix ?? "";
  const operator = await createOperator(options.store);
  const [metricsPort, adminPort] = [findFreePort(), findFreePort()];
  await using started = new AsyncDisposableStack();
  const a = await ctx.startKeygate(
    `mix-a${suffix}`,
    options.store,
    options.aCore ?? ctx.serverCore,
    [
      ...["--metrics", "on", "--metrics-port", String(metricsPort)],
      ...options.extra ?? [],
    ],
    { denoFlags: options.denoFlags },
  );
  started.defer(() => a.stop());
  const b = await ctx.startKeygate(`mix-b${suffix}`, options.store, ctx.otherCore, [
    ...["--admin", "on", "--admin-port", String(adminPort)],
    ...options.extra ?? [],
  ]);
  started.move(); // both up: the caller stops them (stopPair)
  return {
    ...options,
    a,
    b,
    client: Deno.createHttpClient({ caCerts: [ctx.cert] }),
    revokerClients: Array.from(
      { length: REVOKER_CLIENTS },
      () => Deno.createHttpClient({ caCerts: [ctx.cert] }),
    ),
    metricsPort,
    adminOrigin: `https://127.0.0.1:${adminPort}`,
    operator,
    load: { kind: "lua", url: a.origin, args: [options.pairs, "zipf", `${ZIPF_ALPHA}`] },
  };
}

/** Closes a pair's clients and stops its servers. */
export async function stopPair(run: MixRun): Promise<void> {
  run.client.close();
  for (const client of run.revokerClients) client.close();
  try {
    await run.a.stop();
  } finally {
    await run.b.stop();
  }
}

/** Warm-up runs of a pair at most, before the rows. */
const MAX_WARM_UPS = 8;

/**
 * Warms a pair's A before the rows (wrk, no revocations, `ctx.duration` a run) until its grant
 * cache's hit ratio over a run gains under a fifth of a point, or {@link MAX_WARM_UPS} runs have:
 * A's cache keeps what every earlier row read, so a pair that joins later would otherwise start
 * its rows colder than the other. Each warm-up is noted, with the keys its limiter leased per
 * 1,000 requests (with limits: its first leases fall in the first run; hot keys then lease again
 * as they spend their slices, at most 1,000 units each, so the count does not fall to nothing).
 */
export async function warmPair(ctx: PairContext, run: MixRun, label: string): Promise<void> {
  let last = 0;
  for (let warmUp = 1; warmUp <= MAX_WARM_UPS; warmUp++) {
    const before = await readCacheCounters(run.client, run.metricsPort);
    const result = await ctx.measure(run.a, run.load, { duration: ctx.duration });
    const after = await readCacheCounters(run.client, run.metricsPort);
    const hits = after.hits - before.hits;
    const ratio = hits / Math.max(1, hits + after.misses - before.misses);
    const keysPer1000 = (after.leasedKeys - before.leasedKeys) * 1000 /
      Math.max(1, result.requests);
    ctx.notes.push(
      `Production mix, ${label}, warm-up ${warmUp}: ${result.rps.toFixed(0)} req/s, hit ratio ` +
        `${(ratio * 100).toFixed(1)}%, ${keysPer1000.toFixed(1)} keys leased per 1,000 requests.`,
    );
    if (ratio - last < 0.002) return;
    last = ratio;
  }
}

/**
 * Splits a backend's victims between its pairs: every tenth (from the first) for the probes, to
 * each pair in turn of the first (whose probes also time the delays with A idle) and those with
 * rates above 0; the others in proportion to the revocations each pair's rows ask for (the
 * sums of their rates), spread evenly over the list (a smooth weighted round robin: after any
 * prefix, each pair's count is within one of its share).
 */
export function splitVictims<Pair extends string>(
  victims: Victim[],
  rates: Record<Pair, number[]>,
): Record<Pair, MixTraffic> {
  const pairs = Object.keys(rates) as Pair[];
  const probing = victims.filter((_, i) => i % 10 === 0);
  const others = victims.filter((_, i) => i % 10 !== 0);
  const weights = pairs.map((pair) =>
    (rates[pair] as number[]).reduce((total, rate) => total + rate, 0)
  );
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  const probers = pairs.map((_, p) => p).filter((p) => p === 0 || weights[p] > 0);
  const current = weights.map(() => 0);
  const owners = others.map(() => {
    if (total === 0) return -1;
    let chosen = 0;
    for (let p = 0; p < pairs.length; p++) {
      current[p] += weights[p];
      if (current[p] > current[chosen]) chosen = p;
    }
    current[chosen] -= total;
    return chosen;
  });
  return Object.fromEntries(pairs.map((pair, p) => [pair, {
    revocations: listRevocations(others.filter((_, i) => owners[i] === p)),
    probes: toProbes(
      probing.filter((_, i) => probers[i % probers.length] === p),
    ),
  }])) as Record<Pair, MixTraffic>;
}

/** The probe's grants: every sampled token of `victims`. */
function toProbes(victims: Victim[]): { apiKey: string; token: string }[] {
  return victims.flatMap((v) => v.tokens.map((token) => ({ apiKey: v.apiKey, token })));
}

/** Creates a write operator with the admin CLI on `store`; resolves to its token. */
async function createOperator(store: string): Promise<string> {
  const printed = await runAdmin(store, [
    "operator",
    "create",
    `bench${Date.now()}`,
    "--role",
    "write",
  ]);
  const token = /kgo_\S+/.exec(printed)?.[0];
  if (token === undefined) throw new Error("operator create printed no token");
  return token;
}
