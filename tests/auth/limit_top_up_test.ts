/**
 * isTopUpDue(): when a key's slot leases more of its current window in the background, and
 * startLeaseRound()'s keep(): an answer for a window the slot has already left changes nothing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { rollSlot, type Slot, startLeaseRound } from "../../src/auth/limit_slots.ts";
import { toLimitPolicy } from "../../src/auth/limit_status.ts";
import { isTopUpAsking, isTopUpDue, TOP_UP_MS } from "../../src/auth/limit_top_up.ts";
import type { LimitRule, LimitSlice } from "../../src/store/store.ts";
import { toLimitWindow } from "../../src/store/store_limits.ts";

const RULE: LimitRule = {
  id: 7,
  scope: "key",
  subjectId: 1,
  kind: "rate",
  max: 10_000,
  period: "minute",
  createdAt: 0,
  updatedAt: 0,
};
const START = toLimitWindow("minute", Date.UTC(2026, 10, 27, 6, 0, 30)).start;

/** A slot 30 s into its minute, with `local` units in hand; `rate` in units a ms. */
function slotOf(fields: Partial<Slot> = {}): Slot {
  const window = { rule: RULE, windowStart: START, windowEnd: START + 60_000 };
  return {
    ...window,
    policy: toLimitPolicy(window),
    subjectId: 1,
    local: 2,
    used: 1_000,
    exhaustedUntil: 0,
    openUntil: 0,
    admitted: 50,
    leasedAt: START,
    rate: 0.01, // ten a second
    lastUseAt: START + 30_000,
    ahead: 0,
    aheadStart: 0,
    aheadUsed: 0,
    ...fields,
  };
}
const MID = START + 30_000;

Deno.test("a slot down to a quarter second of its traffic tops up; one with more in hand does not", () => {
  assert.equal(isTopUpDue(slotOf({ local: 2 }), MID), true);
  assert.equal(isTopUpDue(slotOf({ local: 0.01 * TOP_UP_MS }), MID), true);
  assert.equal(isTopUpDue(slotOf({ local: 0.01 * TOP_UP_MS + 1 }), MID), false);
  // A busy key tops up earlier: 1,000 a second keeps a quarter second's 250 units in hand.
  assert.equal(isTopUpDue(slotOf({ local: 250, rate: 1 }), MID), true);
  assert.equal(isTopUpDue(slotOf({ local: 251, rate: 1 }), MID), false);
});

Deno.test("a sparse key tops up at its last unit; a lone request (no rate yet) does not", () => {
  assert.equal(isTopUpDue(slotOf({ local: 1, rate: 0.0001 }), MID), true);
  assert.equal(isTopUpDue(slotOf({ local: 2, rate: 0.0001 }), MID), false);
  assert.equal(isTopUpDue(slotOf({ local: 1, rate: 0, admitted: 1 }), MID), false);
  assert.equal(isTopUpDue(slotOf({ local: 1, rate: 0, admitted: 2 }), MID), true);
});

Deno.test("no top-up where the window's budget is half leased: a thread asks only once it is out", () => {
  assert.equal(isTopUpDue(slotOf({ used: 4_999 }), MID), true);
  assert.equal(isTopUpDue(slotOf({ used: 5_000 }), MID), false);
});

Deno.test("a top-up is due until the window's end (sized on what is left of it), not while spent or open", () => {
  assert.equal(isTopUpDue(slotOf(), START + 60_000 - 1), true);
  assert.equal(isTopUpDue(slotOf(), START + 60_000), false);
  assert.equal(isTopUpDue(slotOf({ exhaustedUntil: MID + 1 }), MID), false);
  assert.equal(isTopUpDue(slotOf({ openUntil: MID + 1 }), MID), false);
});

Deno.test("a top-up also asks for a limit out of units, for the requests that wait for it; not one known spent", () => {
  // Contested, so not due itself: but out of units, and a request may be waiting.
  const out = slotOf({ local: 0, used: 9_000 });
  assert.equal(isTopUpDue(out, MID), false);
  assert.equal(isTopUpAsking(out, MID), true);
  assert.equal(
    isTopUpAsking(slotOf({ local: 0, used: 9_000, exhaustedUntil: MID + 1 }), MID),
    false,
  );
  assert.equal(isTopUpAsking(slotOf({ local: 0, used: 9_000, openUntil: MID + 1 }), MID), false);
  assert.equal(isTopUpAsking(slotOf({ local: 40, used: 9_000 }), MID), false);
});

Deno.test("keep(): a lease answered after its slot rolled into the next window leaves that window's units alone", () => {
  const slot = slotOf({ local: 1, ahead: 40, aheadStart: START + 60_000, aheadUsed: 90 });
  const key = { slots: [slot], waiting: 0, lastUseAt: MID, aheadSpread: 0 };
  const round = startLeaseRound(key, START + 58_000, isTopUpDue);
  assert.equal(round.want(RULE, 1_000) > 0, true, "due when asked");
  // The boundary passes while the store call is under way: the slot rolls to its units ahead.
  rollSlot(slot, START + 60_010);
  assert.equal(slot.local, 40);
  const slice: LimitSlice = {
    rule: RULE,
    subjectId: 1,
    window: { start: START, end: START + 60_000 },
    granted: 25,
    used: 1_025,
  };
  round.keep([slice], START + 60_020);
  assert.equal(slot.windowStart, START + 60_000, "still in its own window");
  assert.equal(slot.local, 40, "the ended window's units are not added to the new one's");
  assert.equal(slot.used, 90);
});
