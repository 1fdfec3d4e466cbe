/**
 * A lease's arithmetic, shared by the backends (which read and write the counters): given a
 * counter as stored and the window the lease falls in, how many units to grant and what the
 * counter becomes. Kept in one place so that both dialects grant exactly alike.
 *
 * @module
 */
import { type LimitRule, type LimitSlice, toLimitWindow } from "./store_limits.ts";

/** A counter as stored, or `undefined` when the limit has none for this subject yet. */
export interface StoredCounter {
  windowStart: number;
  used: number;
}

/** What a lease does to one counter: the slice it answers, and the counter to store (if any). */
export interface CounterPlan {
  slice: LimitSlice;
  /** The counter to write; `undefined` when nothing changes. */
  write?: StoredCounter;
}

/**
 * Grants at most what the window has left: a counter of an earlier window starts afresh, a
 * counter of a later window (this server's clock lags the one that wrote it) grants nothing.
 */
export function planLease(
  rule: LimitRule,
  subjectId: number,
  stored: StoredCounter | undefined,
  options: { now: number; want(rule: LimitRule, used: number): number },
): CounterPlan {
  const window = toLimitWindow(rule.period, options.now);
  if (stored !== undefined && stored.windowStart > window.start) {
    return { slice: { rule, subjectId, window, granted: 0, used: stored.used } };
  }
  const fresh = stored === undefined || stored.windowStart < window.start;
  const used = fresh ? 0 : stored.used;
  const wanted = Math.floor(options.want(rule, used));
  const left = Math.max(0, rule.max - used);
  const granted = Number.isFinite(wanted) ? Math.max(0, Math.min(wanted, left)) : 0;
  const slice = { rule, subjectId, window, granted, used: used + granted };
  if (granted === 0 && !fresh) return { slice };
  return { slice, write: { windowStart: window.start, used: used + granted } };
}
