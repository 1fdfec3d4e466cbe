/**
 * The production mix's report (production_mix.ts): what one run of one row measured, and a row
 * of the report from the runs of one rate (the median run, the probes of every run).
 *
 * @module
 */
import { formatCpuRatio, formatRatio, type Measured, type Row } from "./report.ts";
import { percentile } from "./revocation.ts";
import { MAX_OUTSTANDING, type RevokerResult } from "./mix_traffic.ts";
import { ZIPF_ALPHA } from "./mix_seed.ts";
import { formatLearned } from "./mix_probes.ts";

/** What one run of one row measured. */
export interface RateRun {
  result: Measured;
  hits: number;
  lookups: number;
  revoked: RevokerResult;
  /** The probe's delays, ms. */
  delays: number[];
  logged: string;
  /** B's CPU seconds, and this process's (the revoker, the logins and the probe). */
  bCpu: number;
  /** In a control row, the CPU seconds of the control pair's A (which follows the changes). */
  otherACpu?: number;
  generatorCpu: number;
  /** Notifications A received over the run (PostgreSQL), and whether its listener was up after. */
  notified: number;
  /** A's polls of the change record over the run and the rows they read (PostgreSQL). */
  polls: number;
  rowsRead: number;
  listening: boolean | undefined;
  learned: { before: Map<number, number>; after: Map<number, number> };
  /** A's limiter over the run: store calls, keys leased, requests that waited for a lease. */
  leases: { calls: number; keys: number; waits: number };
}

/** The run whose rate is the median of `runs`. */
export function medianRun(runs: RateRun[]): RateRun {
  return [...runs].sort((x, y) => x.result.rps - y.result.rps)[runs.length >> 1];
}

/** A row of the report from the runs of one rate: the median run, the probes of every run. */
export function toRow(
  ctx: { duration: number },
  { backend, rate, runs, base, ...limits }: {
    backend: string;
    rate: number;
    runs: RateRun[];
    /** The median run of the no-revocation row without limits, if it ran. */
    base: RateRun | undefined;
    /** Whether A had a limit on every key. */
    limited: boolean;
    /** Whether this is a control row: the revocations on another store, which A does not follow. */
    control?: boolean;
    /** The median run of the same rate without limits. */
    without: RateRun | undefined;
    /** The median run of the same rate's control row (for a row whose changes A follows). */
    elsewhere?: RateRun;
    /** Whether the `RateLimit` fields were off (`--mix-limit-headers off`). */
    fieldsOff?: boolean;
  },
): Row {
  const median = medianRun(runs);
  const { result, revoked, hits, lookups } = median;
  const delays = runs.flatMap((r) => r.delays);
  const ms = (n: number | undefined) => n === undefined ? "–" : `${n.toFixed(1)} ms`;
  const rounds = runs.length > 1 ? ` (the median of ${runs.length} rounds)` : "";
  const achieved = (revoked.done + median.delays.length) / Math.max(revoked.seconds, ctx.duration);
  const writes = revoked.done + revoked.failed + median.delays.length;
  const answered = revoked.done + revoked.failed;
  const postgres = !Number.isNaN(median.notified);
  return {
    scenario: `production mix, ${rate} revocations/s of other grants through B` +
      (limits.limited ? ", a rate and a quota on every key" : "") +
      (limits.limited && limits.fieldsOff ? ", --limit-headers off" : "") +
      (limits.control
        ? ", control: through another pair's B on a copy of the store, which A does not follow " +
          "(the probe is on that pair's A)"
        : "") +
      rounds,
    server: `keygate on ${backend}`,
    load: `Lua, ${ZIPF_ALPHA === 1 ? "Zipf" : `Zipf α ${ZIPF_ALPHA}`} over the tokens in use`,
    result,
    extra: {
      "hit ratio": lookups === 0 ? "–" : `${(hits / lookups * 100).toFixed(1)}%`,
      "of the no-revocation rate": rate === 0 && !limits.limited
        ? "(the base)"
        : base === undefined
        ? "–"
        : formatRatio(result, base.result) + (runs.length > 1 ? " (of the medians)" : ""),
      // What A would serve held at its limit (a rate ratio counts only when A's core was its
      // limit: with B, PostgreSQL, wrk and the revoker sharing the other core, wrk may not be).
      "A's capacity, by CPU per request": `${
        rate === 0 && !limits.limited
          ? "(the base)"
          : base === undefined
          ? "–"
          : `${formatCpuRatio(base.result, result)} of the base`
      }; A ${result.serverCores.toFixed(2)} cores busy, ${
        result.cpuUsPerRequest.toFixed(1)
      } µs per request`,
      "revocations through B": `${rate}/s asked, **${achieved.toFixed(0)}/s achieved**` +
        ` (${median.delays.length} of them the probe's, ${revoked.failed} failed` +
        (revoked.failed === 0 ? "" : `: ${formatFailures(revoked.failures)}`) +
        (revoked.ranOut ? "; the victims ran out: seed more --tokens" : "") +
        (revoked.unsent === 0
          ? ""
          : `; ${revoked.unsent} due were never sent: all ${MAX_OUTSTANDING} in flight`) +
        `; ${formatKinds(revoked.kinds)}` +
        `); B answered in ${answered === 0 ? "–" : ms(revoked.answerMs / answered)} on average, ${
          (median.bCpu / result.seconds).toFixed(2)
        } cores busy` +
        (median.otherACpu === undefined
          ? ""
          : ` (the control pair's A ${(median.otherACpu / result.seconds).toFixed(2)})`) +
        (writes === 0 ? "" : `, ${(median.bCpu * 1e6 / writes).toFixed(0)} µs CPU per revocation`) +
        `; the bench's revoker, probe and logins ${
          (median.generatorCpu / result.seconds).toFixed(2)
        } cores busy; logins on A ${median.logged}`,
      "revocation to refusal on A":
        (delays.length === 0 ? "–" : (limits.control ? "on the control pair's A, " : "") +
          `${delays.length} probes: p50 ${ms(percentile(delays, 50))}, ` +
          `p99 ${ms(percentile(delays, 99))}, max ${ms(Math.max(...delays))}`) +
        formatLearned(median.learned.before, median.learned.after) +
        (postgres && rate > 0
          ? `; A heard ${median.notified} notifications for ${writes} revocations and polled ` +
            `${median.polls} times (${(median.polls / result.seconds).toFixed(0)}/s, ` +
            `${(median.rowsRead / Math.max(1, median.polls)).toFixed(1)} rows each), ` +
            `its listener ${median.listening ? "up" : "DOWN"} after the run`
          : ""),
      "with limits, of the same rate without": limits.limited
        ? formatLimited(median, runs.length, limits.without)
        : "",
      "following the changes, of the same rate elsewhere": limits.elsewhere === undefined
        ? ""
        : formatFollowing(median, runs.length, limits.elsewhere),
    },
  };
}

/**
 * A row whose changes A follows beside the same rate's control row, where the same revocations
 * went to a store A does not follow: the ratio of the medians' rates (none where either side's
 * victims ran out), and A's capacity by CPU per request.
 */
function formatFollowing(median: RateRun, rounds: number, elsewhere: RateRun): string {
  const ranOut = median.revoked.ranOut || elsewhere.revoked.ranOut;
  return (ranOut
    ? "no ratio: the victims ran out"
    : `**${formatRatio(median.result, elsewhere.result)}**${
      rounds > 1 ? " (of the medians)" : ""
    }`) +
    `; A's capacity, by CPU per request: ${formatCpuRatio(elsewhere.result, median.result)} of it`;
}

/** The writes answered 2xx by kind: `640 tokens, 64 key rotations, 64 revoke-alls`. */
function formatKinds(kinds: RevokerResult["kinds"]): string {
  return `${kinds.token} tokens, ${kinds.rotate} key rotations, ${kinds.user} revoke-alls`;
}

/** Failures by status, most frequent first: `503 ×12, 401 ×3`. */
function formatFailures(failures: Record<string, number>): string {
  return Object.entries(failures).sort((a, b) => b[1] - a[1])
    .map(([status, n]) => `${status} ×${n}`).join(", ");
}

/** A change of p99, in ms: `0.42 ms worse`, `1.20 ms better`. */
function formatP99Change(ms: number): string {
  return `${Math.abs(ms).toFixed(2)} ms ${ms >= 0 ? "worse" : "better"}`;
}

/**
 * A row with limits beside the same rate's row without: the ratio of the medians' rates (no ratio
 * where either side's victims ran out: the one revoking less has less to follow), A's capacity by
 * CPU per request (what decides where A was not at its core's limit), the p99's change, and A's
 * leases per 1,000 requests.
 */
function formatLimited(median: RateRun, rounds: number, without: RateRun | undefined): string {
  const { result, leases } = median;
  const per1000 = (n: number) => (n * 1000 / Math.max(1, result.requests)).toFixed(1);
  const leased = `A's leases per 1,000 requests: ${per1000(leases.calls)} calls, ` +
    `${per1000(leases.keys)} keys, ${per1000(leases.waits)} requests waited`;
  if (without === undefined) return `no row without limits at this rate; ${leased}`;
  const ranOut = median.revoked.ranOut || without.revoked.ranOut;
  return (ranOut
    ? "no ratio: the victims ran out"
    : `**${formatRatio(result, without.result)}**${rounds > 1 ? " (of the medians)" : ""}`) +
    `; A's capacity, by CPU per request: ${formatCpuRatio(without.result, result)} of it; p99 ` +
    `${formatP99Change(result.p99 - without.result.p99)}; ${leased}`;
}
