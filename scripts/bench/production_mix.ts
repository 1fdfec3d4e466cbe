/**
 * The benchmark's "production mix" section (issue 23): secure traffic as an operator's would
 * look while other users' grants keep ending, on SQLite (two keygate processes on one file) and
 * on PostgreSQL (two instances on one database).
 *
 * - `tokens` live tokens (1,000,000 by default), of which the first tenth (up to 100,000: all the
 *   tokens of the first users) are in use, with a Zipf-like popularity (exponent
 *   {@link ZIPF_ALPHA}; wrk's requests.lua `zipf` mode) against instance A;
 * - logins at a steady `LOGINS_PER_SECOND` (mix_traffic.ts) on A (users with a key and no token);
 * - revocations of *other* users' grants at 0, 10, 100 and 1,000 per second through instance B,
 *   in turn a token revocation (`DELETE …/tokens/current`), a key rotation and a revoke-all of
 *   one user (the admin API), each on a user whose tokens A's load never uses;
 * - among those revocations, one to four a second are a probe's: the delay from B's answer to a
 *   token's revocation to A's first 401 for it (A asked one request at a time);
 * - at some rates ({@link LIMIT_ROW_RATES}, `--mix-limit-rates`) a row with limits on every key
 *   too: the same traffic against a second pair of instances on a copy of the store with the
 *   default's rate and quota set (limits_admin.ts, never refusing), its own victims and probes,
 *   beside the row of the same rate without limits (issue 24's ratio under logins and
 *   revocations, where the rates-and-quotas section's load is reads only);
 * - at some rates ({@link CONTROL_ROW_RATES}, `--mix-control-rates`) a control row: A under the
 *   same load and logins while the same revocations and probes go through a third pair, on a copy
 *   of the store, whose A runs on the other core: the machine does all the work of the row but A
 *   follows none of it, so the row without the control over the control is what following the
 *   changes costs A, apart from what the revocations' traffic on the other core costs it.
 *
 * Every run of every row follows the same warm-up (wrk for {@link WARM_UP_SECONDS} without
 * revocations), and `--rounds` runs each row that many times, the rows' order alternating from
 * round to round; a row reports its median run and the ratio of the medians. Each row reports
 * A's throughput, p99, grant-cache hit ratio over the run (from A's /metrics) and the share of
 * the no-revocation row's rate, the revocations B achieved (with B's answer time, the requests
 * never sent because all were in flight, and the CPU of B and of the bench's own traffic: what
 * held the rate back), the delays (with, on PostgreSQL, the notifications A heard), and wrk's
 * CPU share. The revoker, the logins and the probe run in the bench's own process, on
 * wrk's core. What is read of A (its /metrics, the probes with A idle) is in mix_probes.ts;
 * a row of the report is made of its runs in mix_row.ts.
 *
 * @module
 */
import { startPostgres } from "../../tests/_helpers/postgres_cluster.ts";
import type { BenchContext, SectionReport } from "./context.ts";
import { formatRatio, type Measured, type Row } from "./report.ts";
import { runAdmin, setBenchLimits } from "./limits_admin.ts";
import { pinSelf, pinTree, readProcessCpuSeconds } from "./proc.ts";
import { logIn, probeDelays, revoke } from "./mix_traffic.ts";
import {
  type MixRun,
  type MixTraffic,
  type PairContext,
  type PairOptions,
  splitVictims,
  startPair,
  stopPair,
  warmPair,
} from "./mix_pairs.ts";
import {
  cloneMixDatabase,
  copyMixToPostgres,
  type MixSeed,
  seedMix,
  ZIPF_ALPHA,
  zipfHotShare,
} from "./mix_seed.ts";
import { measureIdleDelays, readCacheCounters } from "./mix_probes.ts";
import { medianRun, type RateRun, toRow } from "./mix_row.ts";
import type { Load } from "./wrk.ts";
import { findFreePort } from "../../tests/_helpers/free_port.ts";

/** What the section needs from the bench's driver (its pairs' part: mix_pairs.ts). */
export interface ProductionMixContext extends PairContext {
  work: string;
  /** Live tokens seeded. */
  tokens: number;
  /** Runs of every row, in alternating order; each row reports its median run. */
  rounds: number;
  /** The shared password hash of every seeded user. */
  passwordHash: string;
  /** `--mix-rates`: the rates to run (default {@link REVOCATION_RATES}). */
  mixRates?: number[];
  /** `--mix-a-flags`: extra Deno flags of instance A (e.g. `--cpu-prof`). */
  mixADenoFlags?: string[];
  /** `--mix-limit-rates`: rates with a row with limits too (default {@link LIMIT_ROW_RATES}). */
  mixLimitRates?: number[];
  /** `--mix-limit-headers off`: the rows with limits without their `RateLimit` fields. */
  mixLimitHeaders?: boolean;
  /** `--mix-control-rates`: rates with a control row too (default {@link CONTROL_ROW_RATES}). */
  mixControlRates?: number[];
}

/** The columns of the section's rows, for the report. */
export const PRODUCTION_MIX_COLUMNS = [
  "hit ratio",
  "of the no-revocation rate",
  "A's capacity, by CPU per request",
  "revocations through B",
  "revocation to refusal on A",
  "with limits, of the same rate without",
  "following the changes, of the same rate elsewhere",
];

/** Seconds of wrk (no revocations) right before every run of every row: the same warm-up for all. */
const WARM_UP_SECONDS = 3;

/** Revocations per second through the other instance, one row each. */
export const REVOCATION_RATES = [0, 10, 100, 1000];
/**
 * Revocations per second of the probe, which times revocation to refusal (each one counts in the
 * row's rate: the revoker sends that many fewer); none in the no-revocation row.
 */
const probeRate = (rate: number) => rate === 0 ? 0 : rate <= 10 ? 1 : 4;

/**
 * Revocations per second at which a row with limits on every key is measured too, beside the
 * row without (the rates-and-quotas section measures limits under reads only).
 */
export const LIMIT_ROW_RATES = [100];

/**
 * Revocations per second at which a control row is measured too: the revocations through another
 * pair's B, on a copy of the store, so that A follows none of them.
 */
export const CONTROL_ROW_RATES = [10, 100];

/**
 * How a row's revocations meet A: A follows them (`plain`), A has a limit on every key too
 * (`limited`, its own pair), or they go to another store that A does not follow (`control`).
 */
type Variant = "plain" | "limited" | "control";

/** One row of a backend: a revocation rate and its variant. */
interface MixRowSpec {
  rate: number;
  variant: Variant;
}

/** A row's key among a backend's runs. */
function rowName(row: MixRowSpec): string {
  return `${row.rate}, ${row.variant}`;
}

/** The "Production mix" section of `deno task bench`, on both backends. */
export async function runProductionMixSection(ctx: BenchContext): Promise<SectionReport> {
  return {
    title: "Production mix",
    rows: await runProductionMix(ctx),
    columns: [...PRODUCTION_MIX_COLUMNS],
  };
}

/** Runs the section on both backends; resolves to its rows (notes go to `ctx.notes`). */
export async function runProductionMix(ctx: ProductionMixContext): Promise<Row[]> {
  const seed = await seedMix(ctx);
  const rates = ctx.mixRates ?? REVOCATION_RATES;
  // By default the rows with limits at those of LIMIT_ROW_RATES that run without limits too.
  const limitRates = ctx.mixLimitRates ?? LIMIT_ROW_RATES.filter((rate) => rates.includes(rate));
  const controlRates = ctx.mixControlRates ??
    CONTROL_ROW_RATES.filter((rate) => rates.includes(rate));
  // The limited rows' store: a copy of the seed with the default's limits; the control rows', a
  // plain copy (both made before any row writes to the seed).
  let limitedPath: string | undefined;
  if (limitRates.length > 0) {
    limitedPath = `${ctx.work}/mix-limited.sqlite3`;
    await runAdmin(seed.dbPath, ["db", "backup", limitedPath]);
    await setBenchLimits(limitedPath);
  }
  let controlPath: string | undefined;
  if (controlRates.length > 0) {
    controlPath = `${ctx.work}/mix-control.sqlite3`;
    await runAdmin(seed.dbPath, ["db", "backup", controlPath]);
  }
  const rows: Row[] = [];
  // A alone on its core; everything else (B, wrk, PostgreSQL, and this process's revoker, probe
  // and logins) on the other: what B and the traffic cost must not be taken from A.
  const unpin = await pinSelf(ctx.otherCore);
  const cluster = await startPostgres();
  try {
    const url = await copyMixToPostgres(ctx, cluster, seed.dbPath);
    let limitedUrl: string | undefined;
    if (limitedPath !== undefined) {
      limitedUrl = await cloneMixDatabase(cluster, url, "limits");
      await setBenchLimits(limitedUrl);
    }
    const controlUrl = controlPath === undefined
      ? undefined
      : await cloneMixDatabase(cluster, url, "control");
    const postmaster = Number(
      (await Deno.readTextFile(`${cluster.dir}/data/postmaster.pid`)).split("\n")[0],
    );
    const pinned = unpin !== undefined && await pinTree(postmaster, ctx.otherCore);
    ctx.notes.push(
      pinned
        ? `Production mix: instance A alone on core ${ctx.serverCore}; B, wrk, PostgreSQL and ` +
          `the bench's revoker, probe and logins on core ${ctx.otherCore}` +
          (controlPath === undefined ? "." : ", and the control rows' A and B too.")
        : "Production mix: nothing pinned (taskset missing or refused): A shares its core.",
    );
    // Each backend gets its own half of the victims (a revocation is never repeated), split
    // between its pairs (mix_pairs.ts).
    for (
      const [backend, store, limitedStore, controlStore, half] of [
        ["SQLite, two processes on one file", seed.dbPath, limitedPath, controlPath, 0],
        ["PostgreSQL, two instances", url, limitedUrl, controlUrl, 1],
      ] as const
    ) {
      const traffic = splitVictims(seed.victims.filter((_, i) => i % 2 === half), {
        plain: rates,
        limited: limitedStore === undefined ? [] : limitRates,
        control: controlStore === undefined ? [] : controlRates,
      });
      rows.push(
        ...await runBackend(ctx, {
          backend,
          store,
          pairs: seed.pairs,
          issuers: seed.issuers,
          ...traffic.plain,
          limited: limitedStore === undefined
            ? undefined
            : { store: limitedStore, rates: limitRates, ...traffic.limited },
          control: controlStore === undefined
            ? undefined
            : { store: controlStore, rates: controlRates, ...traffic.control },
        }),
      );
    }
    rows.push(await measureWorkingSet(ctx, seed));
  } finally {
    await cluster.stop();
    await unpin?.();
  }
  return rows;
}

/**
 * The working-set row (SQLite): twice as many tokens in use as the cache holds (200,000 against
 * 100,000 entries at the default 1,000,000 tokens), Zipf, no revocations, after a warm-up; the
 * hit ratio beside the hot set's share, what an oracle holding the most popular would hit.
 */
async function measureWorkingSet(ctx: ProductionMixContext, seed: MixSeed): Promise<Row> {
  const metricsPort = findFreePort();
  const size = seed.inUse;
  ctx.log(`production mix: working set of ${2 * size} tokens against a cache of ${size}`);
  const server = await ctx.startKeygate("mix-wide", seed.dbPath, ctx.serverCore, [
    ...["--metrics", "on", "--metrics-port", String(metricsPort)],
    ...["--grant-cache-size", String(size)],
  ]);
  const client = Deno.createHttpClient({ caCerts: [ctx.cert] });
  try {
    const load: Load = {
      kind: "lua",
      url: server.origin,
      args: [seed.widePairs, "zipf", `${ZIPF_ALPHA}`],
    };
    await ctx.measure(server, load, { duration: Math.max(3, ctx.duration) });
    const before = await readCacheCounters(client, metricsPort);
    const result = await ctx.measure(server, load, { duration: ctx.duration });
    const after = await readCacheCounters(client, metricsPort);
    const hits = after.hits - before.hits;
    const lookups = hits + after.misses - before.misses;
    const hot = zipfHotShare(2 * size, size);
    return {
      scenario: `production mix, working set: ${(2 * size).toLocaleString("en")} tokens in use, ` +
        `a cache of ${size.toLocaleString("en")} entries, no revocations`,
      server: "keygate on SQLite, one process",
      load: `Lua, Zipf α ${ZIPF_ALPHA} over all ${(2 * size).toLocaleString("en")} tokens`,
      result,
      extra: {
        "hit ratio": lookups === 0 ? "–" : `${(hits / lookups * 100).toFixed(1)}% ` +
          `(the hot set's share of requests: ${(hot * 100).toFixed(1)}%)`,
        "of the no-revocation rate": "–",
        "A's capacity, by CPU per request": "–",
        "revocations through B": "–",
        "revocation to refusal on A": "–",
      },
    };
  } finally {
    client.close();
    await server.stop();
  }
}

/**
 * The rows of a backend, in rate order, each rate's plain row between its control row and its
 * row with limits, so that alternating rounds keep the plain row next to both.
 */
function listRows(rates: number[], limitRates: number[], controlRates: number[]): MixRowSpec[] {
  const order: Variant[] = ["control", "plain", "limited"];
  return [
    ...rates.map((rate) => ({ rate, variant: "plain" as const })),
    ...controlRates.map((rate) => ({ rate, variant: "control" as const })),
    ...limitRates.map((rate) => ({ rate, variant: "limited" as const })),
  ].sort((x, y) => x.rate - y.rate || order.indexOf(x.variant) - order.indexOf(y.variant));
}

/** A pair's rows: their store, rates and traffic. */
type PairRows = MixTraffic & { store: string; rates: number[] };

async function runBackend(
  ctx: ProductionMixContext,
  options: Omit<PairOptions, "suffix" | "denoFlags"> & {
    /** The rows with limits: their store (the default's limits set), rates and traffic. */
    limited?: PairRows;
    /** The control rows: their store (a copy of the seed), rates and traffic. */
    control?: PairRows;
  },
): Promise<Row[]> {
  const rounds = new Map<string, RateRun[]>();
  const rows = listRows(
    ctx.mixRates ?? REVOCATION_RATES,
    options.limited?.rates ?? [],
    options.control?.rates ?? [],
  );
  {
    await using pairs = new AsyncDisposableStack();
    const plain = await startPair(ctx, { ...options, denoFlags: ctx.mixADenoFlags });
    pairs.defer(() => stopPair(plain));
    // A's twin with limits serves on A's core and idles while A is measured, and the other way.
    const limited = options.limited === undefined ? undefined : await startPair(ctx, {
      ...options,
      ...options.limited,
      suffix: "-limits",
      extra: ctx.mixLimitHeaders === false ? ["--limit-headers", "off"] : [],
    });
    if (limited !== undefined) pairs.defer(() => stopPair(limited));
    // The control rows' pair takes their revocations and probes on a copy of the store; its A,
    // never under wrk, on the other core, so that A's core does nothing for the changes.
    const control = options.control === undefined ? undefined : await startPair(ctx, {
      ...options,
      ...options.control,
      suffix: "-control",
      aCore: ctx.otherCore,
    });
    if (control !== undefined) pairs.defer(() => stopPair(control));
    // Both pairs warmed alike before the rows: A's cache keeps what every row before read.
    await warmPair(ctx, plain, options.backend);
    if (limited !== undefined) await warmPair(ctx, limited, `${options.backend}, with limits`);
    // Every row gets the same warm-up right before it, and the order of the rows alternates
    // from round to round (0, 10, 100, 1,000, then back), so that no row owes its rate to the
    // cache the rows before it warmed, nor to where the machine's slow spells fell.
    for (let round = 1; round <= ctx.rounds; round++) {
      const order = round % 2 === 1 ? rows : [...rows].reverse();
      for (const row of order) {
        const run = row.variant === "limited" ? limited! : plain;
        ctx.log(
          `production mix, ${options.backend}${
            row.variant === "limited" ? ", limits on every key" : ""
          }, round ${round}/${ctx.rounds}: warming up, then ${row.rate} revocations/s through ` +
            (row.variant === "control" ? "the control pair's B" : "B"),
        );
        await ctx.measure(run.a, run.load, { duration: WARM_UP_SECONDS });
        const runs = rounds.get(rowName(row)) ?? [];
        rounds.set(rowName(row), runs);
        runs.push(
          await measureRate(ctx, run, row.rate, row.variant === "control" ? control : undefined),
        );
      }
    }
    await measureIdleDelays(ctx, plain, options.store);
  }
  // Without the no-revocation row (`--mix-rates` left it out) the ratios are not given.
  const zero = rounds.get(rowName({ rate: 0, variant: "plain" }));
  const base = zero === undefined ? undefined : medianRun(zero);
  return rows.map((row) => {
    const runs = rounds.get(rowName(row))!;
    // A row with limits is compared with the same rate's row without, round by round too; a
    // plain row with the same rate's control row.
    const without = row.variant === "limited"
      ? rounds.get(rowName({ ...row, variant: "plain" }))
      : undefined;
    const elsewhere = row.variant === "plain"
      ? rounds.get(rowName({ ...row, variant: "control" }))
      : undefined;
    const against = row.variant === "limited" ? without : zero;
    if (runs.length > 1) {
      const byRound = (others: RateRun[]) =>
        runs.map((r, i) => formatRatio(r.result, others[i].result)).join(", ");
      ctx.notes.push(
        `Production mix, ${options.backend}, ${row.rate} revocations/s` +
          ({ plain: "", limited: ", with limits on every key", control: ", control" })[
            row.variant
          ] + `: req/s by round ${runs.map((r) => r.result.rps.toFixed(0)).join(", ")}` +
          ((row.rate === 0 && row.variant === "plain") || against === undefined
            ? ""
            : `; of the same round's ${row.variant === "limited" ? "row without limits" : "base"} ${
              byRound(against)
            }`) +
          (elsewhere === undefined ? "" : `; of the same round's control ${byRound(elsewhere)}`) +
          ".",
      );
    }
    return toRow(ctx, {
      backend: options.backend,
      rate: row.rate,
      runs,
      base,
      limited: row.variant === "limited",
      control: row.variant === "control",
      without: without === undefined ? undefined : medianRun(without),
      elsewhere: elsewhere === undefined ? undefined : medianRun(elsewhere),
      fieldsOff: ctx.mixLimitHeaders === false,
    });
  });
}

/**
 * One run of one row: A measured while B takes `rate` revocations a second, logins and the probe
 * run; in a control row (`elsewhere`: the control pair) the revocations, the probe and the B
 * measured are that pair's, on its own store, and A's load and logins are the same.
 */
async function measureRate(
  ctx: ProductionMixContext,
  run: MixRun,
  rate: number,
  elsewhere?: MixRun,
): Promise<RateRun> {
  const { client, a } = run;
  const revoking = elsewhere ?? run;
  const b = revoking.b;
  const before = await readCacheCounters(client, run.metricsPort);
  const bCpuBefore = b.readCpuSeconds();
  // A control row's other A learns the changes on the other core: its CPU, beside B's.
  const otherACpuBefore = elsewhere?.a.readCpuSeconds();
  const generatorCpuBefore = readProcessCpuSeconds(Deno.pid);
  const stop = { now: false };
  const revoker = revoke({
    rate: rate - probeRate(rate),
    stop,
    clients: revoking.revokerClients,
    b: b.origin,
    adminOrigin: revoking.adminOrigin,
    operator: revoking.operator,
    revocations: revoking.revocations,
  });
  const logins = logIn({ stop, client, a: a.origin, issuers: run.issuers });
  const probe = probeDelays({
    stop,
    client,
    a: revoking.a.origin,
    b: b.origin,
    probes: rate === 0 ? [] : revoking.probes,
    everyMs: 1000 / Math.max(1, probeRate(rate)),
  });
  let result: Measured;
  try {
    result = await ctx.measure(a, run.load, { duration: ctx.duration });
  } finally {
    stop.now = true;
  }
  const [revoked, logged, delays] = [await revoker, await logins, await probe];
  const after = await readCacheCounters(client, run.metricsPort);
  const hits = after.hits - before.hits;
  return {
    result,
    hits,
    lookups: hits + after.misses - before.misses,
    revoked,
    delays,
    logged,
    bCpu: b.readCpuSeconds() - bCpuBefore,
    otherACpu: otherACpuBefore === undefined
      ? undefined
      : elsewhere!.a.readCpuSeconds() - otherACpuBefore,
    generatorCpu: readProcessCpuSeconds(Deno.pid) - generatorCpuBefore,
    notified: after.notifications - before.notifications,
    polls: after.polls - before.polls,
    rowsRead: after.rowsRead - before.rowsRead,
    listening: after.listening,
    learned: { before: before.delayBuckets, after: after.delayBuckets },
    leases: {
      calls: after.leaseCalls - before.leaseCalls,
      keys: after.leasedKeys - before.leasedKeys,
      waits: after.leaseWaits - before.leaseWaits,
    },
  };
}
