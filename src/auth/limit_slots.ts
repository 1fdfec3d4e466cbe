/**
 * The limiter's accounting of one key's limits on one thread: a slot per limit, holding the
 * units leased from its current window, and the rules for spending them, sizing the next
 * lease, keeping its answer and giving units back. No store and no clock: the limiter
 * (limiter.ts) passes `now` and the store's answers in.
 *
 * Slices adapt: a lease asks for about {@link SLICE_TARGET_MS} of this thread's recent traffic
 * on the key (at least the requests waiting, and at least a 64th of what the window has left,
 * so that a sparse key with a plentiful budget does not lease per request), never more than an
 * eighth of what the window has left, so slices shrink to one unit as a window runs out.
 *
 * Leases ahead (limit_ahead.ts): units leased for a slot's next window before the boundary are
 * kept apart (`ahead`) until their window starts, when they become the units in hand.
 *
 * @module
 */
import type { LimitReturn, LimitRule, LimitSlice } from "../store/store.ts";
import { toLimitWindow } from "../store/store_limits.ts";
import { type LimitPolicy, type LimitStatuses, NO_LIMITS, toLimitPolicy } from "./limit_status.ts";

/** A lease aims at this much of the thread's recent traffic on a key. */
export const SLICE_TARGET_MS = 1_000;
/** A key's rate at its leases is measured over at least this long. */
export const RATE_SAMPLE_MS = 100;
/** The most units one lease takes from one window. */
export const MAX_SLICE = 1_000;
/** A lease never takes more than this share of what its window has left. */
const LEFT_SHARE = 8;
/**
 * A lease takes at least this share of what its window has left (at most {@link MAX_SLICE}), so
 * that a key with a plentiful budget and sparse traffic does not lease for every request.
 */
const SPARE_SHARE = 64;
/** Units unused this long go back to the store. */
export const IDLE_RETURN_MS = 1_000;
/** After a lease found a window spent, refuse locally this long before asking again. */
export const RECHECK_MS = 250;

/** One limit of a key, as this thread holds it. */
export interface Slot {
  rule: LimitRule;
  /** What responses say of it; replaced when the rule or the window's length changes. */
  policy: LimitPolicy;
  subjectId: number;
  windowStart: number;
  windowEnd: number;
  /** Units in hand for this window. */
  local: number;
  /** The window's units leased by every server, as of this thread's last lease. */
  used: number;
  exhaustedUntil: number;
  openUntil: number;
  /**
   * Admitted since the lease that last measured the rate, and when that was (a lease within
   * {@link RATE_SAMPLE_MS} of it measures nothing): this thread's rate on the key.
   */
  admitted: number;
  leasedAt: number;
  /** Units per ms, as measured at its leases. */
  rate: number;
  lastUseAt: number;
  /** Units leased ahead for the window starting at `aheadStart` (the next one). */
  ahead: number;
  /** The window the last lease ahead was asked for (0: none yet). */
  aheadStart: number;
  /** That window's units leased by every server, as of the lease ahead. */
  aheadUsed: number;
}

/** A key's slots on this thread. */
export interface KeySlots {
  /** `undefined` until the first lease has said which limits apply. */
  slots?: Slot[];
  /** The slots' policies, kept until one of them changes. */
  policies?: readonly LimitPolicy[];
  /** Requests of the key waiting for a lease. */
  waiting: number;
  lastUseAt: number;
  /**
   * Where in the spread of leases ahead this key leases (limit_ahead.ts, `toAheadMargin`): 0 (no
   * earlier than its margin says) to 1 (`AHEAD_SPREAD_MS` before its window ends); drawn when the
   * thread makes the key's entry.
   */
  aheadSpread: number;
}

/**
 * Moves a slot into the window of `now`: the units leased ahead for it become the units in hand
 * (the units of an ended window are lost); says whether its policy changed (a month's length).
 */
export function rollSlot(slot: Slot, now: number): boolean {
  if (now < slot.windowEnd) return false;
  const window = toLimitWindow(slot.rule.period, now);
  slot.windowStart = window.start;
  slot.windowEnd = window.end;
  const carried = slot.aheadStart === window.start;
  slot.local = carried ? slot.ahead : 0;
  slot.used = carried ? slot.aheadUsed : 0;
  slot.ahead = 0;
  slot.exhaustedUntil = 0;
  const was = slot.policy;
  slot.policy = toLimitPolicy(slot, was);
  return slot.policy !== was;
}

/** Whether a slot admits without a lease: units in hand, or open while the store is away. */
function isAdmitting(slot: Slot, now: number): boolean {
  return slot.local >= 1 || slot.openUntil > now;
}

/**
 * Whether the units in hand admit a request now: `undefined` if they do, else the slot that
 * refuses, or `"lease"` when some limit needs units.
 */
export function checkSlots(key: KeySlots, slots: Slot[], now: number): Slot | "lease" | undefined {
  let lease = false;
  for (const slot of slots) {
    if (rollSlot(slot, now)) key.policies = undefined;
    if (isAdmitting(slot, now)) continue;
    if (slot.exhaustedUntil > now) return slot;
    lease = true;
  }
  return lease ? "lease" : undefined;
}

/** Admits a request from the units in hand (after {@link checkSlots} said they do). */
export function takeUnits(key: KeySlots, slots: Slot[], now: number): LimitStatuses {
  key.lastUseAt = now;
  if (slots.length === 0) return NO_LIMITS;
  for (const slot of slots) {
    if (slot.local >= 1) slot.local--;
    slot.admitted++;
    slot.lastUseAt = now;
  }
  return toStatuses(key, slots, now);
}

/** The statuses of a key's slots at `now`; `denied`'s remaining is 0. */
export function toStatuses(
  key: KeySlots,
  slots: Slot[],
  now: number,
  denied?: Slot,
): LimitStatuses {
  const remaining: number[] = new Array(slots.length);
  const resetSeconds: (number | undefined)[] = new Array(slots.length);
  for (let i = 0; i < slots.length; i++) {
    const slot = slots[i];
    remaining[i] = slot === denied ? 0 : Math.max(0, slot.rule.max - slot.used) + slot.local;
    resetSeconds[i] = Number.isFinite(slot.windowEnd)
      ? Math.max(0, Math.ceil((slot.windowEnd - now) / 1000))
      : undefined;
  }
  const policies = slots === key.slots
    ? key.policies ??= slots.map((slot) => slot.policy)
    : slots.map((slot) => slot.policy);
  return { policies, remaining, resetSeconds };
}

/** Seconds until a refusing slot's window ends (at least 1); `undefined` if it never does. */
export function toRetryAfter(slot: Slot, now: number): number | undefined {
  return Number.isFinite(slot.windowEnd)
    ? Math.max(1, Math.ceil((slot.windowEnd - now) / 1000))
    : undefined;
}

/** The slots that would need a lease now (none in hand, not open, not known spent). */
export function findNeedingSlots(key: KeySlots, now: number): Slot[] {
  return (key.slots ?? []).filter((slot) => !isAdmitting(slot, now) && slot.exhaustedUntil <= now);
}

function toSlot(slice: LimitSlice, now: number): Slot {
  const window = { rule: slice.rule, windowStart: slice.window.start, windowEnd: slice.window.end };
  return {
    ...window,
    policy: toLimitPolicy(window),
    subjectId: slice.subjectId,
    local: 0,
    used: slice.used - slice.granted,
    exhaustedUntil: 0,
    openUntil: 0,
    admitted: 0,
    leasedAt: now,
    rate: 0,
    lastUseAt: now,
    ahead: 0,
    aheadStart: 0,
    aheadUsed: 0,
  };
}

/**
 * This thread's rate on a slot's key, in units a ms, to size a lease on: the higher of the rate
 * measured at its leases and the one since the last (over at least {@link SLICE_TARGET_MS}, so
 * that the requests a lease released at once do not read as a burst). A pause in the key's
 * traffic lowers either measure that spans it, so the higher is the closer; one too high leases
 * units that go back through the idle return where the budget is contested, and one too low a
 * slice that runs out.
 */
export function toRate(slot: Slot, now: number): number {
  return Math.max(slot.rate, slot.admitted / Math.max(SLICE_TARGET_MS, now - slot.leasedAt));
}

/**
 * How many units a limit that needs some asks for (`rate`: this thread's on the key, if known;
 * `spendMs`: how long the window leased from has left to spend them in).
 */
export function wantUnits(
  rule: LimitRule,
  rate: number | undefined,
  waiting: number,
  used: number,
  spendMs: number,
) {
  const left = rule.max - used;
  let want = Math.max(1 + waiting, Math.floor(left / SPARE_SHARE));
  if (rate !== undefined) {
    want = Math.max(want, Math.ceil(rate * SLICE_TARGET_MS));
    // No more than this thread may spend before the window ends.
    const spendable = Math.ceil(rate * spendMs) + waiting + 1;
    if (Number.isFinite(spendable)) want = Math.min(want, spendable);
  }
  return Math.min(want, MAX_SLICE, Math.max(1, Math.floor(left / LEFT_SHARE)));
}

/** One lease of a key's slots: what it asks the store for, and how the answer is kept. */
export interface LeaseRound {
  /** `Store.leaseLimits`' `want`: 0 for a limit whose units in hand still admit. */
  want(rule: LimitRule, used: number): number;
  /** Keeps the slices granted as the key's slots (`after`: when the answer came). */
  keep(slices: readonly LimitSlice[], after: number): void;
}

/** Whether a slot needs units before it admits again (none in hand, not open). */
const needsUnits = (slot: Slot, now: number) => !isAdmitting(slot, now);

/**
 * Starts a lease of `key`'s slots at `now`: of those that need units before they admit again, or
 * of those `due` says (a top-up: limit_top_up.ts).
 */
export function startLeaseRound(
  key: KeySlots,
  now: number,
  due: (slot: Slot, now: number) => boolean = needsUnits,
): LeaseRound {
  const known = new Map((key.slots ?? []).map((slot) => [slot.rule.id, slot]));
  const asked = new Set<number>();
  return {
    want(rule, used) {
      const slot = known.get(rule.id);
      if (slot !== undefined) {
        rollSlot(slot, now);
        if (!due(slot, now)) return 0;
        slot.rule = rule;
      }
      asked.add(rule.id);
      return slot === undefined
        ? wantUnits(rule, undefined, key.waiting, used, 0)
        : wantUnits(rule, toRate(slot, now), key.waiting, used, slot.windowEnd - now);
    },
    keep(slices, after) {
      const before = key.slots;
      // The policies array (and the headers rendered from it) stays while no policy changed.
      let changed = before === undefined || before.length !== slices.length;
      key.slots = slices.map((slice, i) => {
        const slot = known.get(slice.rule.id) ?? toSlot(slice, now);
        // The slot rolled past the window leased from while the lease was under way: those units
        // are of an ended window, and the slot keeps what it carried into its own.
        if (slice.window.end <= slot.windowStart) return slot;
        slot.rule = slice.rule;
        // A roll that changes the policy (a month's length) says so: `was` below is then the new
        // one.
        if (slice.window.start >= slot.windowEnd) {
          if (rollSlot(slot, slice.window.start)) changed = true;
        } else if (slot.windowStart !== slice.window.start) {
          slot.windowStart = slice.window.start;
          slot.windowEnd = slice.window.end;
          slot.local = 0;
        }
        const was = slot.policy;
        slot.policy = toLimitPolicy(slot, was);
        if (slot.policy !== was || before?.[i] !== slot) changed = true;
        slot.local += slice.granted;
        slot.used = slice.used;
        if (asked.has(slice.rule.id)) {
          // A rate is measured over at least RATE_SAMPLE_MS: the requests a lease released at
          // once, then a lease a few ms later, are no rate; they count in the next measure.
          const elapsed = after - slot.leasedAt;
          if (elapsed >= RATE_SAMPLE_MS) {
            slot.rate = (slot.rate + slot.admitted / elapsed) / 2;
            slot.admitted = 0;
            slot.leasedAt = after;
          }
          slot.openUntil = 0;
          slot.exhaustedUntil = slice.granted === 0
            ? Math.min(slot.windowEnd, after + RECHECK_MS)
            : 0;
        }
        return slot;
      });
      if (changed) key.policies = undefined;
    },
  };
}

/**
 * Takes a key's units out of its slots into `returns` (those of a window still open, and those
 * leased ahead, with their window's start): all of them, or with `onlyIdle` those unused for
 * {@link IDLE_RETURN_MS} where half the window's budget is leased (idle units matter only where
 * the budget is contested), or, with `retiring` (a rotated key, whose traffic moves to its
 * successor), contested or not. A slot whose window ended is rolled first (its units leased
 * ahead are then the units in hand).
 */
export function releaseUnits(
  key: KeySlots,
  now: number,
  options: { onlyIdle: boolean; returns: LimitReturn[]; retiring?: boolean },
): void {
  for (const slot of key.slots ?? []) {
    if (rollSlot(slot, now)) key.policies = undefined;
    const idle = now - slot.lastUseAt >= IDLE_RETURN_MS;
    const contested = options.retiring === true || slot.used * 2 >= slot.rule.max;
    if (slot.local > 0 && (!options.onlyIdle || idle && contested)) {
      // The roll above leaves `now` inside the slot's window: its units are returnable.
      options.returns.push(toReturn(slot, slot.windowStart, slot.local));
      slot.used = Math.max(0, slot.used - slot.local);
      slot.local = 0;
    }
    const aheadContested = options.retiring === true || slot.aheadUsed * 2 >= slot.rule.max;
    if (slot.ahead > 0 && (!options.onlyIdle || idle && aheadContested)) {
      options.returns.push(toReturn(slot, slot.aheadStart, slot.ahead));
      slot.ahead = 0;
      // Not leased ahead any more: a key that comes back before the boundary leases ahead again
      // (limit_ahead.ts leases once per window, `aheadStart` marking it).
      slot.aheadStart = 0;
      slot.aheadUsed = 0;
    }
  }
}

function toReturn(slot: Slot, windowStart: number, units: number): LimitReturn {
  return { limitId: slot.rule.id, subjectId: slot.subjectId, windowStart, units };
}

/** The units of slices granted to a key that was dropped meanwhile, to give straight back. */
export function toSliceReturns(slices: readonly LimitSlice[]): LimitReturn[] {
  return slices.filter((slice) => slice.granted > 0).map((slice) => ({
    limitId: slice.rule.id,
    subjectId: slice.subjectId,
    windowStart: slice.window.start,
    units: slice.granted,
  }));
}
