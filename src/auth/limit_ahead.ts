/**
 * Leases ahead: a key used in the last part of its window ({@link toAheadMargin}) leases its
 * next window's units before the boundary (`Store.leaseLimits` with `ahead`, sized as a lease
 * is, against what the next window has left), so that at the boundary its slots roll to units
 * already in hand (limit_slots.ts `rollSlot`) and no request waits for a store call. No store
 * and no clock: the limiter (limiter.ts) runs the lease in the background and passes `now` in.
 *
 * @module
 */
import type { LimitReturn, LimitRule, LimitSlice } from "../store/store.ts";
import { toLimitWindow } from "../store/store_limits.ts";
import { type KeySlots, type Slot, toRate, toSliceReturns, wantUnits } from "./limit_slots.ts";

/** A lease ahead is due at least this long before a window ends (a quarter of a short window). */
export const AHEAD_MS = 1_000;

/** A slot leases ahead within this many of its key's requests (at this thread's rate) of the end. */
const AHEAD_REQUESTS = 2;

/**
 * Each key's lease ahead falls at its own moment in up to this long before a window ends (its
 * {@link KeySlots.aheadSpread} of it, never past a quarter of the window): fixed windows end at
 * once for every key, and without a spread every key a thread serves leases ahead in the same
 * second or few, every store call of that burst contending with the next instance's for the
 * same counters' locks.
 */
export const AHEAD_SPREAD_MS = 15_000;

/**
 * How long before its window ends a slot leases ahead: {@link AHEAD_MS}, or longer for a key
 * whose requests on this thread come further apart than half that (the time {@link AHEAD_REQUESTS}
 * of them take at the rate measured at its leases, so that one of them falls in it: a key seen
 * every 2 s leases ahead in its window's last 4 s, where a second would catch it half the time),
 * or longer for a key whose place in the spread (`spread`, 0 to 1, drawn per key and thread) is
 * further from the end (up to {@link AHEAD_SPREAD_MS}); never more than a quarter of the window
 * (a per-second rate leases ahead in its last 250 ms, not all through its window). A second is
 * ample for a store call (milliseconds, tens under load, with the batch before it); the spread
 * keeps a boundary's leases ahead from all falling in that second. Leasing earlier costs nothing
 * in exactness (the units count against the next window wherever they are leased) and at most a
 * slice of units held for a key that then stops before the boundary, which the idle return gives
 * back where the budget is contested.
 */
export function toAheadMargin(slot: Slot, now: number, spread = 0): number {
  const rate = toRate(slot, now);
  const spacing = rate > 0 ? AHEAD_REQUESTS / rate : 0;
  return Math.min(
    Math.max(AHEAD_MS, spacing, spread * AHEAD_SPREAD_MS),
    (slot.windowEnd - slot.windowStart) / 4,
  );
}

/**
 * Whether a slot should lease its next window's units now: in the last part of its window
 * ({@link toAheadMargin}), with a rate (more than one request, traffic measured at a lease
 * before, or a request refused: a lone request does not lease ahead), not yet leased ahead for
 * that window.
 */
function isAheadDue(slot: Slot, now: number, refused: boolean, spread: number): boolean {
  // The margin's arithmetic last: most admitted requests fail a comparison before it.
  return now < slot.windowEnd && slot.aheadStart !== slot.windowEnd &&
    (refused || slot.rate > 0 || slot.admitted > 1) &&
    now >= slot.windowEnd - toAheadMargin(slot, now, spread);
}

/**
 * Marks the slots of a key whose lease ahead is due at `now` as leasing ahead (once per window,
 * also when it fails); says whether any was. `refused`: the request was refused (a key at its
 * limit leases ahead too, or its requests after the boundary would all wait for a lease).
 */
export function markAheadDue(key: KeySlots, now: number, refused = false): boolean {
  let due = false;
  for (const slot of key.slots ?? []) {
    if (!isAheadDue(slot, now, refused, key.aheadSpread)) continue;
    slot.aheadStart = slot.windowEnd;
    slot.ahead = 0;
    // Until the answer says: a failed (or refused) lease ahead carries no earlier window's count.
    slot.aheadUsed = 0;
    due = true;
  }
  return due;
}

/**
 * Whether a key's lease ahead has nothing left to ask for at `now`: none of its slots is marked
 * for a window that has not begun (the boundary passed while it waited for its turn).
 */
export function isAheadOver(key: KeySlots, now: number): boolean {
  return !(key.slots ?? []).some((slot) =>
    slot.aheadStart === slot.windowEnd && now < slot.windowEnd
  );
}

/**
 * Starts a lease ahead of `key`'s slots marked by {@link markAheadDue} at `now`: what it asks the
 * store for (the next window's units: about a second of this thread's traffic on the key, as a
 * lease is sized), and how the answer is kept; `keep` returns the units it cannot keep (a slot
 * dropped or moved past their window meanwhile), to give straight back.
 */
export function startAheadRound(key: KeySlots, now: number) {
  const known = new Map((key.slots ?? []).map((slot) => [slot.rule.id, slot]));
  const asked = new Set<number>();
  return {
    want(rule: LimitRule, used: number): number {
      const slot = known.get(rule.id);
      if (slot === undefined || slot.aheadStart !== slot.windowEnd || now >= slot.windowEnd) {
        return 0;
      }
      asked.add(rule.id);
      const next = toLimitWindow(rule.period, slot.windowEnd);
      return wantUnits(rule, toRate(slot, now), 0, used, next.end - next.start);
    },
    keep(slices: readonly LimitSlice[]): LimitReturn[] {
      const returns: LimitReturn[] = [];
      for (const slice of slices) {
        const slot = known.get(slice.rule.id);
        const kept = slot !== undefined && asked.has(slice.rule.id) &&
          key.slots?.includes(slot) === true;
        if (kept && slice.window.start === slot.windowEnd) {
          // Also when none was granted: what the next window has used is known.
          slot.ahead += slice.granted;
          slot.aheadStart = slice.window.start;
          slot.aheadUsed = slice.used;
        } else if (slice.granted === 0) continue;
        else if (kept && slice.window.start === slot.windowStart) {
          // The slot rolled into that window meanwhile: the units are for now.
          slot.local += slice.granted;
          slot.used = Math.max(slot.used, slice.used);
          slot.exhaustedUntil = 0;
        } else returns.push(...toSliceReturns([slice]));
      }
      return returns;
    },
  };
}
