/**
 * A lease's arithmetic, shared by the backends (which read and write the counters): given a
 * counter as stored and the window the lease falls in, how many units to grant and what the
 * counter becomes; and what a return of unspent units does to it. Kept in one place so that both
 * dialects grant exactly alike.
 *
 * A counter counts two windows: `used`, the units leased from its window (`windowStart`), and
 * `nextUsed`, the units leased ahead from the window that follows it (a thread that leases its
 * next window's units before the boundary, so that the boundary does not stall its requests).
 * When a lease finds the counter one window behind, the new window starts at the units leased
 * ahead for it; two or more windows behind, at 0. So every unit of a window is counted against
 * that very window, whether it was leased in it or ahead of it, and the grants of a window never
 * exceed its limit.
 *
 * @module
 */
import {
  type LimitPeriod,
  type LimitReturn,
  type LimitRule,
  type LimitSlice,
  type LimitWindow,
  toLimitWindow,
} from "./store_limits.ts";

/** A counter as stored, or `undefined` when the limit has none for this subject yet. */
export interface StoredCounter {
  windowStart: number;
  used: number;
  /** Units leased ahead from the window after `windowStart`'s. */
  nextUsed: number;
}

/** What a lease does to one counter: the slice it answers, and the counter to store (if any). */
export interface CounterPlan {
  slice: LimitSlice;
  /** The counter to write; `undefined` when nothing changes. */
  write?: StoredCounter;
}

/** What a lease is asked: when, how many units, and whether from the next window. */
export interface LeaseAsk {
  now: number;
  want(rule: LimitRule, used: number): number;
  /** Leases from the window after `now`'s (its `used` is what was leased ahead of it). */
  ahead?: boolean;
}

/** The window after `window` (a quota without refill has none: its one window never ends). */
export function toNextWindow(period: LimitPeriod, window: LimitWindow): LimitWindow | undefined {
  return Number.isFinite(window.end) ? toLimitWindow(period, window.end) : undefined;
}

/**
 * The counter as of `window`: as stored in that window; carried over from the window just before
 * (its units leased ahead become the window's `used`); afresh when two or more windows behind or
 * missing; `undefined` when it already counts a later window (a clock that lags).
 */
export function toCounterAt(
  period: LimitPeriod,
  stored: StoredCounter | undefined,
  window: LimitWindow,
): StoredCounter | undefined {
  if (stored === undefined) return { windowStart: window.start, used: 0, nextUsed: 0 };
  if (stored.windowStart > window.start) return undefined;
  if (stored.windowStart === window.start) return stored;
  const carried = toLimitWindow(period, stored.windowStart).end === window.start
    ? stored.nextUsed
    : 0;
  return { windowStart: window.start, used: carried, nextUsed: 0 };
}

/** How many units to grant: at most what is left of `max`, and none for a `want` not a number. */
function toGrant(rule: LimitRule, used: number, want: (rule: LimitRule, used: number) => number) {
  const wanted = Math.floor(want(rule, used));
  const left = Math.max(0, rule.max - used);
  return Number.isFinite(wanted) ? Math.max(0, Math.min(wanted, left)) : 0;
}

/**
 * Grants at most what the window has left: a counter of an earlier window starts afresh (or at
 * the units leased ahead for this one), a counter of a later window (this server's clock lags
 * the one that wrote it) grants nothing. An `ahead` lease grants from the next window, at most
 * what it has left, without touching the current window's units; a quota without refill grants
 * nothing ahead.
 */
export function planLease(
  rule: LimitRule,
  subjectId: number,
  stored: StoredCounter | undefined,
  ask: LeaseAsk,
): CounterPlan {
  const window = toLimitWindow(rule.period, ask.now);
  const counter = toCounterAt(rule.period, stored, window);
  if (counter === undefined) {
    return { slice: { rule, subjectId, window, granted: 0, used: stored!.used } };
  }
  const moved = counter !== stored;
  const next = ask.ahead ? toNextWindow(rule.period, window) : undefined;
  if (ask.ahead && next === undefined) {
    const slice = { rule, subjectId, window, granted: 0, used: counter.used };
    return moved ? { slice, write: counter } : { slice };
  }
  const from = next === undefined ? counter.used : counter.nextUsed;
  const granted = toGrant(rule, from, ask.want);
  const slice = { rule, subjectId, window: next ?? window, granted, used: from + granted };
  if (granted === 0 && !moved) return { slice };
  const write = next === undefined
    ? { ...counter, used: from + granted }
    : { ...counter, nextUsed: from + granted };
  return { slice, write };
}

/**
 * What a return of unspent units does to a counter: it takes them off the window it names, the
 * counter's or the one after it (units leased ahead), never below 0; a window the counter no
 * longer holds (ended, or two ahead) takes nothing. `undefined` when nothing changes.
 */
export function planReturn(
  period: LimitPeriod,
  stored: StoredCounter | undefined,
  units: LimitReturn,
): StoredCounter | undefined {
  if (stored === undefined || units.units <= 0) return undefined;
  if (stored.windowStart === units.windowStart) {
    return { ...stored, used: Math.max(0, stored.used - units.units) };
  }
  const next = toNextWindow(period, toLimitWindow(period, stored.windowStart));
  if (next !== undefined && next.start === units.windowStart) {
    return { ...stored, nextUsed: Math.max(0, stored.nextUsed - units.units) };
  }
  return undefined;
}
