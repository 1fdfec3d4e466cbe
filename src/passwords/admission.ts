/**
 * The password pool's admission: the hash time it counts and the decision for the next job.
 *
 * Admission is by time, not by count: a job is accepted while its expected wait (jobs ahead of it
 * and itself, × the measured time a hash takes, ÷ the workers) stays within `maxWaitMs`, and
 * refused at once beyond that with a Retry-After computed from the queue: the time the jobs out
 * are expected to take, after which the queue is (nearly) empty. The time a hash takes is an
 * exponentially weighted moving average of the measured ones ({@link HASH_TIME_WEIGHT}), so a
 * slower machine, or a busy one, admits fewer. Two times are measured on the worker's thread: the
 * hash's wall time and, where the worker can read it, its CPU time. Admission counts the wall
 * time, but at most {@link CONTENTION_CAP} × the CPU time: the workers run in the idle class, so a
 * storm of requests (a client re-sending every refused login at once) stretches their wall time
 * without bound, and an estimate following it refuses more, which brings more re-sent logins: a
 * feedback loop that left 5 of 50,000 logins answered (docs/performance.md, "Login bursts"). The
 * Retry-After counts the whole wall time: it says when the queue is expected to have drained as
 * hashes run now.
 *
 * A hard cap on the jobs waiting ({@link maxQueueFor}) protects memory whatever the estimate says.
 *
 * @module
 */
import { JOBS_PER_WORKER } from "./hash_workers.ts";

/** The longest expected wait for a hash by default: five seconds (`--login-queue-wait`). */
export const DEFAULT_MAX_WAIT_MS = 5000;

/**
 * The hash time assumed before any is measured (a worker's first hash is): one argon2id hash with
 * {@link ARGON2_OPTIONS} took 15–17 ms on the reference machine (58–65 hashes a second on one
 * core, docs/performance.md), rounded up.
 */
export const INITIAL_HASH_MS = 20;

/**
 * Weight of each new measured hash time in the moving average (about the last ten count); the
 * first measurement replaces {@link INITIAL_HASH_MS} outright.
 */
export const HASH_TIME_WEIGHT = 0.2;

/**
 * How far the hash time admission counts may exceed the CPU time: 2×. Beyond it the workers are
 * starved of CPU, by other processes or by this one's own requests, and the extra is counted no
 * more. Two, because a burst of 100 logins held in the queue on one core at 16–21 ms of CPU a hash
 * (the reference machine, and the quiet shared one of docs/performance.md) then stays within the
 * default bound of 5 s however the wall time swells (2 × 21 ms × 100 is 4.2 s): a client
 * re-sending at once finds every login admitted rather than a storm of refusals. Where hashes take
 * up to 2× their CPU time (a busy host), admission follows the wall time exactly; beyond that it
 * admits more than the wall time says, and an admitted login may wait longer than the bound.
 */
export const CONTENTION_CAP = 2;

/**
 * The fastest hash the hard cap allows for: a third of what argon2id over 19 MiB took on the
 * reference machine, so the cap refuses only where hashes are far faster than measured there,
 * or the estimate has gone wrong.
 */
export const MIN_HASH_MS = 5;

/**
 * The hard cap on jobs waiting for `workers` and a bound of `maxWaitMs`: as many as could finish
 * within the bound if each hash took {@link MIN_HASH_MS}; 2,000 with 2 workers and 5 s.
 */
export function maxQueueFor(workers: number, maxWaitMs: number): number {
  return Math.max(workers * JOBS_PER_WORKER, Math.ceil((workers * maxWaitMs) / MIN_HASH_MS));
}

/** The moving averages of measured hash times, and the one admission counts. */
export interface HashTimes {
  /** The moving average of hashes' CPU time, in ms (wall time where the worker cannot read it). */
  readonly cpuMs: number;
  /** The moving average of hashes' wall time on their worker's thread, in ms. */
  readonly wallMs: number;
  /** The hash time admission counts: the wall time's average, at most CONTENTION_CAP × the CPU's. */
  admitted(): number;
  /** Counts one measured hash: the first replaces the assumed time, later ones move the average. */
  record(wallMs: number, cpuMs: number): void;
}

/** Hash times that start at `initialMs` until the first hash is measured. */
export function createHashTimes(initialMs: number): HashTimes {
  let cpuMs = initialMs;
  let wallMs = initialMs;
  let measured = false;
  return {
    get cpuMs() {
      return cpuMs;
    },
    get wallMs() {
      return wallMs;
    },
    admitted: () => Math.max(cpuMs, Math.min(wallMs, CONTENTION_CAP * cpuMs)),
    record(wall, cpu) {
      cpuMs = measured ? cpuMs + HASH_TIME_WEIGHT * (cpu - cpuMs) : cpu;
      wallMs = measured ? wallMs + HASH_TIME_WEIGHT * (wall - wallMs) : wall;
      measured = true;
    },
  };
}

/** What the decision for a job asked while every worker is busy reads. */
export interface QueueLoad {
  /** Jobs accepted and not yet answered. */
  out: number;
  workers: number;
  /** The hash time admission counts ({@link HashTimes.admitted}). */
  hashMs: number;
  /** The wall time's moving average. */
  wallMs: number;
  maxWaitMs: number;
  maxQueue: number;
}

/**
 * The Retry-After (seconds, before rounding) a job asked now, with every worker busy, would be
 * refused with, or `undefined` when it would be admitted: it waits while its expected wait (the
 * jobs out and itself, × the hash time admission counts, ÷ the workers) is within the bound and
 * the queue under its hard cap.
 */
export function findRetryAfter(load: QueueLoad): number | undefined {
  const { out, workers, hashMs, maxWaitMs, maxQueue } = load;
  if (((out + 1) * hashMs) / workers <= maxWaitMs && out - workers < maxQueue) return undefined;
  // Retry once the jobs out now are expected to be done, as hashes run now: the queue is then
  // (nearly) empty.
  return (out * Math.max(hashMs, load.wallMs)) / workers / 1000;
}
