/**
 * Top-ups: a key whose units in hand run low in its window leases more of that window while its
 * requests go on (the one that starts it does not wait), so that its next requests admit from
 * units already in hand instead of waiting for a lease once the last one is spent. A slice is
 * sized on the thread's rate on the key (limit_slots.ts, toRate), and a rate measured across a
 * pause in the key's traffic is too low: without top-ups, every slice sized on one made a request
 * wait.
 *
 * A top-up is an ordinary lease of the current window (the store grants no more than the window
 * has left), so exactness is unchanged, and servers that do not top up read the same counts. It
 * is due only where the window's budget is not contested (less than half of it leased, as of the
 * slot's last lease): where it is, a thread asks only once it is out, so that no thread holds units
 * another one needs. Near the window's end a top-up is sized, as any lease, on what the thread can
 * spend before the end (limit_slots.ts, wantUnits); the next window's units are a lease ahead's
 * (limit_ahead.ts). No store and no clock: the limiter (limiter.ts) runs the lease and passes
 * `now` in.
 *
 * @module
 */
import type { KeySlots, Slot } from "./limit_slots.ts";

/** A slot tops up once its units in hand are this much of its traffic, at this thread's rate. */
export const TOP_UP_MS = 250;
/** After a top-up failed, its key does not top up again for this long. */
export const TOP_UP_RETRY_MS = 1_000;

/**
 * Whether a slot should lease more of its current window now: its units in hand are down to
 * {@link TOP_UP_MS} of its traffic (its last unit, for a key seen less often), it has a rate
 * (traffic measured at a lease before, or more than one request), and its window's budget is
 * less than half leased.
 */
export function isTopUpDue(slot: Slot, now: number): boolean {
  // The cheapest test first: most admitted requests leave plenty in hand.
  if (slot.local > 1 && slot.local > slot.rate * TOP_UP_MS) return false;
  return (slot.rate > 0 || slot.admitted > 1) && slot.used * 2 < slot.rule.max &&
    slot.exhaustedUntil <= now && slot.openUntil <= now && now < slot.windowEnd;
}

/**
 * Whether a top-up asks for a slot's units: it is due one, or it needs units before it admits
 * again (none in hand, not open, not known spent), since a request that runs out waits for the
 * top-up under way rather than leasing on its own.
 */
export function isTopUpAsking(slot: Slot, now: number): boolean {
  return isTopUpDue(slot, now) ||
    slot.local < 1 && slot.openUntil <= now && slot.exhaustedUntil <= now;
}

/**
 * Whether a key should top up at `now`: a slot of it is due ({@link isTopUpDue}). On every admitted
 * request of a limited key, so a loop rather than a closure.
 */
export function isKeyTopUpDue(key: KeySlots, now: number): boolean {
  for (const slot of key.slots ?? []) if (isTopUpDue(slot, now)) return true;
  return false;
}

/** Whether a queued top-up of a key still has something to ask for ({@link isTopUpAsking}). */
export function isKeyTopUpAsking(key: KeySlots, now: number): boolean {
  return key.slots?.some((slot) => isTopUpAsking(slot, now)) ?? false;
}
