/**
 * toRate() and a lease's keep(): the rate a key's lease is sized on is measured over at least a
 * second since the last measure, and a lease within RATE_SAMPLE_MS of the last one measures
 * nothing, so that requests a lease released at once do not read as a burst.
 *
 * @module
 */
import assert from "node:assert/strict";
import { RATE_SAMPLE_MS, type Slot, startLeaseRound, toRate } from "../../src/auth/limit_slots.ts";
import { toLimitPolicy } from "../../src/auth/limit_status.ts";
import type { LimitRule } from "../../src/store/store.ts";

const RULE: LimitRule = {
  id: 3,
  scope: "key",
  subjectId: 1,
  kind: "rate",
  max: 1_000_000,
  period: "hour",
  createdAt: 0,
  updatedAt: 0,
};
const START = 3_600_000 * 500_000;

function slotOf(fields: Partial<Slot>): Slot {
  const window = { rule: RULE, windowStart: START, windowEnd: START + 3_600_000 };
  return {
    ...window,
    policy: toLimitPolicy(window),
    subjectId: 1,
    local: 0,
    used: 0,
    exhaustedUntil: 0,
    openUntil: 0,
    admitted: 0,
    leasedAt: START,
    rate: 0,
    lastUseAt: START,
    ahead: 0,
    aheadStart: 0,
    aheadUsed: 0,
    ...fields,
  };
}

Deno.test("toRate(): a hundred requests released at once, 3 ms after a lease, read as 100 a second, not 33 a ms", () => {
  assert.equal(toRate(slotOf({ admitted: 100 }), START + 3), 0.1);
  // Over more than a second, the rate since the lease is what it is.
  assert.equal(toRate(slotOf({ admitted: 100 }), START + 2_000), 0.05);
  // The higher of it and the rate measured at the leases.
  assert.equal(toRate(slotOf({ admitted: 100, rate: 0.5 }), START + 2_000), 0.5);
});

Deno.test("keep(): a lease within RATE_SAMPLE_MS of the last measure leaves the rate to the next one", () => {
  const slot = slotOf({ admitted: 100, local: 0 });
  const key = { slots: [slot], waiting: 0, lastUseAt: START, aheadSpread: 0 };
  const slice = {
    rule: RULE,
    subjectId: 1,
    window: { start: START, end: START + 3_600_000 },
    granted: 10,
    used: 10,
  };
  const soon = startLeaseRound(key, START + 1);
  assert.ok(soon.want(RULE, 0) > 0);
  soon.keep([slice], START + 3);
  assert.deepEqual([slot.rate, slot.admitted, slot.leasedAt], [0, 100, START], "nothing measured");
  assert.equal(slot.local, 10, "the units are kept all the same");

  slot.local = 0;
  const later = startLeaseRound(key, START + RATE_SAMPLE_MS * 2);
  assert.ok(later.want(RULE, 10) > 0);
  later.keep([{ ...slice, used: 20 }], START + RATE_SAMPLE_MS * 2);
  assert.equal(slot.rate, (0 + 100 / (RATE_SAMPLE_MS * 2)) / 2, "measured over the whole span");
  assert.deepEqual([slot.admitted, slot.leasedAt], [0, START + RATE_SAMPLE_MS * 2]);
});
