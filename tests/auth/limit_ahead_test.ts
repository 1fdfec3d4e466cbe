/**
 * toAheadMargin(): how long before its window ends a key's slot leases its next window's units.
 * A second, or the time two of the key's requests take on this thread when they come further
 * apart (so that one of them falls in the margin), never more than a quarter of the window. The
 * rate is the higher of the one measured at the slot's leases and the one since the last. A key's
 * place in the spread (0 to 1) moves it up to 15 s earlier, within the same cap.
 *
 * @module
 */
import assert from "node:assert/strict";
import { AHEAD_MS, AHEAD_SPREAD_MS, toAheadMargin } from "../../src/auth/limit_ahead.ts";
import type { Slot } from "../../src/auth/limit_slots.ts";

/** A slot of a window `lengthMs` long whose key came `rate` times a ms at its leases. */
function slotOf(lengthMs: number, rate: number, admitted = 0): Slot {
  return {
    windowStart: 60_000,
    windowEnd: 60_000 + lengthMs,
    rate,
    admitted,
    leasedAt: 60_000,
  } as Slot;
}
/** The margins below are asked for 30 s into the window. */
const NOW = 90_000;

Deno.test("a busy key, or one whose rate is not measured yet, leases ahead in the last second", () => {
  assert.equal(toAheadMargin(slotOf(60_000, 0), NOW), AHEAD_MS);
  assert.equal(toAheadMargin(slotOf(60_000, 0.05), NOW), AHEAD_MS); // 50 a second
  assert.equal(toAheadMargin(slotOf(3_600_000, 0.002), NOW), AHEAD_MS); // one every 500 ms
});

Deno.test("a key seen every 2 s leases ahead in its window's last 4 s, where a second would miss it", () => {
  assert.equal(toAheadMargin(slotOf(60_000, 1 / 2_000), NOW), 4_000);
  assert.equal(toAheadMargin(slotOf(3_600_000, 1 / 10_000), NOW), 20_000);
});

Deno.test("the margin is never more than a quarter of the window", () => {
  assert.equal(toAheadMargin(slotOf(60_000, 1 / 20_000), NOW), 15_000); // every 20 s: 40 s, capped
  assert.equal(toAheadMargin(slotOf(1_000, 0.01), NOW), 250); // a per-second rate
  assert.equal(toAheadMargin(slotOf(1_000, 0), NOW), 250);
});

Deno.test("a key whose rate was never measured at a lease is spaced by its requests since its last one", () => {
  // 15 requests in the 30 s since its only lease: one every 2 s, so its last 4 s.
  assert.equal(toAheadMargin(slotOf(60_000, 0, 15), NOW), 4_000);
  // A rate measured at a lease that is higher wins: 50 a second, the last second.
  assert.equal(toAheadMargin(slotOf(60_000, 0.05, 15), NOW), AHEAD_MS);
});

Deno.test("a key's place in the spread moves its margin up to 15 s before the end, within a quarter of the window", () => {
  // A busy key (50 a second), at the spread's near end, middle and far end of a minute.
  assert.equal(toAheadMargin(slotOf(60_000, 0.05), NOW, 0), AHEAD_MS);
  assert.equal(toAheadMargin(slotOf(60_000, 0.05), NOW, 0.5), 7_500);
  assert.equal(toAheadMargin(slotOf(60_000, 0.05), NOW, 1), AHEAD_SPREAD_MS);
  // Never under the second a store call may need, nor over the quarter of a short window.
  assert.equal(toAheadMargin(slotOf(60_000, 0.05), NOW, 0.01), AHEAD_MS);
  assert.equal(toAheadMargin(slotOf(1_000, 0.05), NOW, 1), 250);
  assert.equal(toAheadMargin(slotOf(20_000, 0.05), NOW, 1), 5_000);
  // A long window spreads over the same 15 s, not its quarter.
  assert.equal(toAheadMargin(slotOf(3_600_000, 0.05), NOW, 1), 15_000);
  // A sparse key's spacing wins where it is longer than its place in the spread.
  assert.equal(toAheadMargin(slotOf(3_600_000, 1 / 10_000), NOW, 0.5), 20_000);
});
