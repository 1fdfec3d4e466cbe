/**
 * A lease's arithmetic, shared by the backends (which read and write the counters): given a
 * counter as stored and the window the lease falls in, how many units to grant and what the
 * counter becomes; and what a return of unspent units does to it. Kept in one place so that both
 * dialects grant exactly alike.
 *
 * A counter counts two windows: `used`, the units leased from its window (`windowStart`), and
 * `nextUsed`, the units leased ahead (a thread that leases its next window's units before the
 * boundary, so that the boundary does not stall its requests) from the window that starts at
 * `nextStart`, the one after `windowStart`'s when they were leased. When a lease finds the counter
 * of an earlier window, the new window starts at the units leased ahead for it (`nextStart` is
 * its start), else at 0. So every unit of a window is counted against that very window, whether
 * it was leased in it or ahead of it, and the grants of a window never exceed its limit.
 *
 * A rolling upgrade: an instance older than `nextUsed` (0.17 or earlier) moves a counter to a new
 * window afresh, writing `windowStart` and `used` only, and leaves `nextUsed` and `nextStart` as
 * they were. So a counter whose `windowStart` is its `nextStart` was moved by an old instance into
 * the window its units were leased ahead for: they are counted in that window's `used` from then
 * on (they are being spent), and never carried into a later window (whose `nextStart` they do not
 * match). The bound: each window that begins while old and new instances share the database
 * admits at most its limit plus the units the new ones leased ahead for it (an old instance that
 * moves the counter grants from 0 without them), so at most twice its limit; no excess is carried
 * into the window after it; once every instance runs this version, every window admits at most its
 * limit. `--limit-lease-ahead off` on the new instances until then keeps every window to its
 * limit.
 *
 * @module
 */
import { StoreError } from "./errors.ts";
import {
  type LimitPeriod,
  type LimitReturn,
  type LimitRule,
  type LimitSlice,
  type LimitWindow,
  MAX_CHAIN_WALK,
  toLimitWindow,
} from "./store_limits.ts";

/** A counter as stored, or `undefined` when the limit has none for this subject yet. */
export interface StoredCounter {
  windowStart: number;
  used: number;
  /** Units leased ahead from the window that starts at `nextStart`. */
  nextUsed: number;
  /** The start of the window `nextUsed` counts (0 when none was leased ahead). */
  nextStart: number;
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
function toNextWindow(period: LimitPeriod, window: LimitWindow): LimitWindow | undefined {
  return Number.isFinite(window.end) ? toLimitWindow(period, window.end) : undefined;
}

/**
 * The counter as of `window`: as stored in that window; carried over from an earlier window (its
 * units leased ahead for this one become the window's `used`); afresh when none were leased ahead
 * for it or the counter is missing; `undefined` when it already counts a later window (a clock that
 * lags). A counter an old instance moved into the window its units were leased ahead for (its
 * `windowStart` is its `nextStart`) counts them in `used`.
 */
export function toCounterAt(
  stored: StoredCounter | undefined,
  window: LimitWindow,
): StoredCounter | undefined {
  if (stored === undefined) return { windowStart: window.start, used: 0, ...NOTHING_AHEAD };
  if (stored.windowStart > window.start) return undefined;
  if (stored.windowStart === window.start) {
    if (stored.nextStart !== window.start || stored.nextUsed === 0) return stored;
    return { windowStart: window.start, used: stored.used + stored.nextUsed, ...NOTHING_AHEAD };
  }
  const carried = stored.nextStart === window.start ? stored.nextUsed : 0;
  return { windowStart: window.start, used: carried, ...NOTHING_AHEAD };
}

const NOTHING_AHEAD = { nextUsed: 0, nextStart: 0 } as const;

/** How many units to grant: at most what is left of `max`, and none for a `want` not a number. */
function toGrant(rule: LimitRule, used: number, want: (rule: LimitRule, used: number) => number) {
  const wanted = Math.floor(want(rule, used));
  const left = Math.max(0, rule.max - used);
  return Number.isFinite(wanted) ? Math.max(0, Math.min(wanted, left)) : 0;
}

/**
 * Grants at most what the window has left: a counter of an earlier window starts afresh (or at
 * the units leased ahead for this one), a counter of a later window (this server's clock lags
 * the one that wrote it) grants nothing, unless the lease is `ahead` for that very window (it
 * then grants from it as it stands). An `ahead` lease grants from the next window, at most
 * what it has left, without touching the current window's units; a quota without refill grants
 * nothing ahead.
 */
export function planLease(
  rule: LimitRule,
  subjectId: number,
  stored: StoredCounter | undefined,
  ask: LeaseAsk,
): CounterPlan {
  if (ask.ahead && stored !== undefined) {
    // Another server (its clock a little ahead) moved the counter into the next window already:
    // a lease ahead is then a lease of that window as it stands, not a refusal.
    const next = toNextWindow(rule.period, toLimitWindow(rule.period, ask.now));
    if (next !== undefined && stored.windowStart === next.start) {
      return planLease(rule, subjectId, stored, { ...ask, now: next.start, ahead: false });
    }
  }
  const window = toLimitWindow(rule.period, ask.now);
  const counter = toCounterAt(stored, window);
  if (counter === undefined) {
    return { slice: { rule, subjectId, window, granted: 0, used: stored!.used } };
  }
  const moved = counter !== stored;
  const next = ask.ahead ? toNextWindow(rule.period, window) : undefined;
  if (ask.ahead && next === undefined) {
    const slice = { rule, subjectId, window, granted: 0, used: counter.used };
    return moved ? { slice, write: counter } : { slice };
  }
  const from = next === undefined
    ? counter.used
    : counter.nextStart === next.start
    ? counter.nextUsed
    : 0;
  const granted = toGrant(rule, from, ask.want);
  const slice = { rule, subjectId, window: next ?? window, granted, used: from + granted };
  if (granted === 0 && !moved) return { slice };
  const write = next === undefined
    ? { ...counter, used: from + granted }
    : { ...counter, nextUsed: from + granted, nextStart: next.start };
  return { slice, write };
}

/**
 * What a return of unspent units does to a counter: it takes them off the window it names, the
 * counter's or the one its units leased ahead count (`nextStart`), never below 0; a window the
 * counter no longer holds (ended, or two ahead) takes nothing. A counter an old instance moved
 * into its ahead window counts those units in `used` first (`toCounterAt`). `undefined` when
 * nothing changes.
 */
export function planReturn(
  period: LimitPeriod,
  stored: StoredCounter | undefined,
  units: LimitReturn,
): StoredCounter | undefined {
  if (stored === undefined || units.units <= 0) return undefined;
  if (stored.windowStart === units.windowStart) {
    const counter = toCounterAt(stored, toLimitWindow(period, stored.windowStart))!;
    return { ...counter, used: Math.max(0, counter.used - units.units) };
  }
  if (stored.nextStart === units.windowStart && stored.nextUsed > 0) {
    return { ...stored, nextUsed: Math.max(0, stored.nextUsed - units.units) };
  }
  return undefined;
}

/**
 * A lease of a key more than `MAX_CHAIN_WALK` rotations behind its chain's last key
 * (store_limits.ts): made by hand, since `rotateKey` refuses to put one more than
 * `MAX_ROTATION_CHAIN` behind. The lease fails (a 500 for the key's requests) rather than count
 * the key against limits that are not its chain's.
 */
export class TooLongChain extends StoreError {
  constructor(apiKeyId: number) {
    super(
      `API key ${apiKeyId} is more than ${MAX_CHAIN_WALK} rotations behind its chain's last key`,
    );
    this.name = "TooLongChain";
  }
}
