/**
 * Top-ups: a key whose units in hand run low in the middle of its window leases more of that
 * window in the background, so that its next requests admit from units already in hand instead
 * of waiting for a lease once the last one is spent. A slice is sized on the thread's rate as
 * measured at its leases (limit_slots.ts), and a rate measured across a pause in the key's
 * traffic is too low: without top-ups, every slice sized on it made a request wait.
 *
 * A top-up is an ordinary lease of the current window (the store grants no more than the window
 * has left), so exactness is unchanged, and servers that do not top up read the same counts. It
 * is due only where the window's budget is not contested (less than half of it leased, as of the
 * slot's last lease): where it is, a thread asks only once it is out, so that no thread holds units
 * another one needs. It is not due in the last part of the window, where the key leases ahead
 * instead (limit_ahead.ts). No store and no clock: the limiter (limiter.ts) runs the lease in the
 * background and passes `now` in.
 *
 * @module
 */
import { toAheadMargin } from "./limit_ahead.ts";
import type { KeySlots, Slot } from "./limit_slots.ts";

/** A slot tops up once its units in hand are this much of its traffic, at this thread's rate. */
export const TOP_UP_MS = 250;

/**
 * Whether a slot should lease more of its current window now: its units in hand are down to
 * {@link TOP_UP_MS} of its traffic (its last unit, for a key seen less often), it has a rate
 * (traffic measured at a lease before, or more than one request), its window's budget is less
 * than half leased, and the window is not in the part where the key leases ahead.
 */
export function isTopUpDue(slot: Slot, now: number): boolean {
  // The cheapest test first: most admitted requests leave plenty in hand.
  if (slot.local > 1 && slot.local > slot.rate * TOP_UP_MS) return false;
  return (slot.rate > 0 || slot.admitted > 1) && slot.used * 2 < slot.rule.max &&
    slot.exhaustedUntil <= now && slot.openUntil <= now &&
    now < slot.windowEnd - toAheadMargin(slot);
}

/** Whether any slot of a key should top up at `now` ({@link isTopUpDue}). */
export function isKeyTopUpDue(key: KeySlots, now: number): boolean {
  const slots = key.slots;
  if (slots === undefined) return false;
  for (const slot of slots) if (isTopUpDue(slot, now)) return true;
  return false;
}
