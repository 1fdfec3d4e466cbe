/**
 * The lease arithmetic both backends share (src/store/limit_lease.ts): carry-over of units leased
 * ahead, windows skipped, grants ahead bounded by what the next window has left, a lagging clock,
 * months, quotas without refill, and returns to either window.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  planLease,
  planReturn,
  type StoredCounter,
  toCounterAt,
} from "../../src/store/limit_lease.ts";
import type { LimitPeriod, LimitRule } from "../../src/store/store_limits.ts";
import { toLimitWindow } from "../../src/store/store_limits.ts";

const MINUTE = 60_000;
/** 2026-11-27 10:00:00 UTC, a minute's start. */
const W0 = Date.UTC(2026, 10, 27, 10, 0, 0);

function rule(max: number, period: LimitPeriod, kind: "rate" | "quota" = "rate"): LimitRule {
  return { id: 1, scope: "key", subjectId: 7, kind, max, period, createdAt: 0, updatedAt: 0 };
}

const wants = (n: number) => () => n;

const NOTHING_AHEAD = { nextUsed: 0, nextStart: 0 };

Deno.test("planLease() grants ahead from the next window without touching the current one's units", () => {
  const stored: StoredCounter = { windowStart: W0, used: 60, nextUsed: 0, nextStart: 0 };
  let told: number | undefined;
  const plan = planLease(rule(100, "minute"), 7, stored, {
    now: W0 + 59_500,
    ahead: true,
    want: (_rule, used) => {
      told = used;
      return 30;
    },
  });
  assert.equal(told, 0, "want() is told what the next window has used");
  assert.deepEqual(plan.slice.window, { start: W0 + MINUTE, end: W0 + 2 * MINUTE });
  assert.equal(plan.slice.granted, 30);
  assert.equal(plan.slice.used, 30);
  assert.deepEqual(plan.write, {
    windowStart: W0,
    used: 60,
    nextUsed: 30,
    nextStart: W0 + MINUTE,
  });
});

Deno.test("planLease() grants ahead at most what the next window has left (max − nextUsed)", () => {
  const stored: StoredCounter = {
    windowStart: W0,
    used: 100,
    nextUsed: 90,
    nextStart: W0 + MINUTE,
  };
  const plan = planLease(rule(100, "minute"), 7, stored, {
    now: W0 + 59_000,
    ahead: true,
    want: wants(50),
  });
  assert.equal(plan.slice.granted, 10, "the current window being spent does not matter");
  assert.deepEqual(plan.write, {
    windowStart: W0,
    used: 100,
    nextUsed: 100,
    nextStart: W0 + MINUTE,
  });
  const spent = planLease(rule(100, "minute"), 7, plan.write, {
    now: W0 + 59_100,
    ahead: true,
    want: wants(50),
  });
  assert.equal(spent.slice.granted, 0);
  assert.equal(spent.write, undefined, "nothing to write");
});

Deno.test("planLease() starts a window one behind at the units leased ahead for it", () => {
  const stored: StoredCounter = {
    windowStart: W0,
    used: 100,
    nextUsed: 40,
    nextStart: W0 + MINUTE,
  };
  const plan = planLease(rule(100, "minute"), 7, stored, { now: W0 + MINUTE + 5, want: wants(80) });
  assert.deepEqual(plan.slice.window, { start: W0 + MINUTE, end: W0 + 2 * MINUTE });
  assert.equal(plan.slice.granted, 60, "the window had 40 leased ahead of it");
  assert.equal(plan.slice.used, 100);
  assert.deepEqual(plan.write, { windowStart: W0 + MINUTE, used: 100, nextUsed: 0, nextStart: 0 });
  // Ahead of a window that starts from carried units: its own next window is empty.
  const ahead = planLease(rule(100, "minute"), 7, stored, {
    now: W0 + MINUTE + 59_500,
    ahead: true,
    want: wants(20),
  });
  assert.equal(ahead.slice.granted, 20);
  assert.deepEqual(ahead.write, {
    windowStart: W0 + MINUTE,
    used: 40,
    nextUsed: 20,
    nextStart: W0 + 2 * MINUTE,
  });
});

Deno.test("planLease() starts a window two or more behind at 0", () => {
  const stored: StoredCounter = {
    windowStart: W0,
    used: 100,
    nextUsed: 40,
    nextStart: W0 + MINUTE,
  };
  const plan = planLease(rule(100, "minute"), 7, stored, {
    now: W0 + 2 * MINUTE,
    want: wants(500),
  });
  assert.equal(plan.slice.granted, 100);
  assert.deepEqual(plan.write, {
    windowStart: W0 + 2 * MINUTE,
    used: 100,
    nextUsed: 0,
    nextStart: 0,
  });
  // A lease that takes nothing still moves the counter on (and carries over).
  const moved = planLease(rule(100, "minute"), 7, stored, { now: W0 + MINUTE, want: wants(0) });
  assert.equal(moved.slice.granted, 0);
  assert.equal(moved.slice.used, 40);
  assert.deepEqual(moved.write, { windowStart: W0 + MINUTE, used: 40, nextUsed: 0, nextStart: 0 });
});

Deno.test("planLease() grants nothing from a counter of a later window (a lagging clock); ahead, from that window", () => {
  const stored: StoredCounter = {
    windowStart: W0 + MINUTE,
    used: 10,
    nextUsed: 5,
    nextStart: W0 + 2 * MINUTE,
  };
  const now = W0 + 59_900;
  const plan = planLease(rule(100, "minute"), 7, stored, { now, want: wants(10) });
  assert.equal(plan.slice.granted, 0);
  assert.equal(plan.write, undefined);
  // Ahead, the lagging server leases the very window the counter holds: counted there.
  const ahead = planLease(rule(100, "minute"), 7, stored, { now, ahead: true, want: wants(10) });
  assert.equal(ahead.slice.window.start, W0 + MINUTE);
  assert.equal(ahead.slice.granted, 10);
  assert.deepEqual(ahead.write, { ...stored, used: 20 });
});

Deno.test("planLease() leases a month's next window through the calendar; carries into it", () => {
  const december = Date.UTC(2026, 11, 1);
  const january = Date.UTC(2027, 0, 1);
  const plan = planLease(rule(1_000, "month", "quota"), 7, undefined, {
    now: january - 500,
    ahead: true,
    want: wants(100),
  });
  assert.deepEqual(plan.slice.window, toLimitWindow("month", january));
  assert.deepEqual(plan.write, {
    windowStart: december,
    used: 0,
    nextUsed: 100,
    nextStart: january,
  });
  const carried = planLease(rule(1_000, "month", "quota"), 7, plan.write, {
    now: january + 10,
    want: wants(1_000),
  });
  assert.equal(carried.slice.granted, 900);
  assert.deepEqual(carried.write, { windowStart: january, used: 1_000, nextUsed: 0, nextStart: 0 });
});

Deno.test("planLease() never leases ahead for a quota without refill", () => {
  const stored: StoredCounter = { windowStart: 0, used: 10, nextUsed: 0, nextStart: 0 };
  let asked = false;
  const plan = planLease(rule(100, "none", "quota"), 7, stored, {
    now: W0,
    ahead: true,
    want: () => {
      asked = true;
      return 10;
    },
  });
  assert.equal(asked, false);
  assert.equal(plan.slice.granted, 0);
  assert.equal(plan.slice.used, 10);
  assert.equal(plan.write, undefined);
});

Deno.test("planReturn() takes units off the window they name, the counter's or the next, never below 0", () => {
  const stored: StoredCounter = { windowStart: W0, used: 50, nextUsed: 20, nextStart: W0 + MINUTE };
  const unit = (windowStart: number, units: number) => ({
    limitId: 1,
    subjectId: 7,
    windowStart,
    units,
  });
  assert.deepEqual(planReturn("minute", stored, unit(W0, 5)), { ...stored, used: 45 });
  assert.deepEqual(planReturn("minute", stored, unit(W0 + MINUTE, 30)), {
    ...stored,
    nextUsed: 0,
  });
  assert.equal(planReturn("minute", stored, unit(W0 - MINUTE, 5)), undefined, "ended");
  assert.equal(planReturn("minute", stored, unit(W0 + 2 * MINUTE, 5)), undefined, "not held");
  assert.equal(planReturn("minute", undefined, unit(W0, 5)), undefined);
  const quota = { windowStart: 0, used: 9, nextUsed: 0, nextStart: 0 };
  assert.equal(planReturn("none", quota, unit(1, 5)), undefined);
});

Deno.test("toCounterAt() carries a counter one window behind, restarts one further behind, refuses a later one", () => {
  const stored: StoredCounter = { windowStart: W0, used: 50, nextUsed: 20, nextStart: W0 + MINUTE };
  const at = (start: number) => toCounterAt(stored, toLimitWindow("minute", start));
  assert.equal(at(W0), stored);
  assert.deepEqual(at(W0 + MINUTE), { windowStart: W0 + MINUTE, used: 20, ...NOTHING_AHEAD });
  assert.deepEqual(at(W0 + 2 * MINUTE), {
    windowStart: W0 + 2 * MINUTE,
    used: 0,
    ...NOTHING_AHEAD,
  });
  assert.equal(at(W0 - MINUTE), undefined);
});

/**
 * A lease as an instance of 0.17 or earlier (before units were leased ahead) makes it: a counter
 * of an earlier window starts afresh at 0, and its UPDATE writes `window_start` and `used` only,
 * leaving the columns it does not know as they were.
 */
function leaseAsOldInstance(max: number, stored: StoredCounter, now: number, want: number) {
  const window = toLimitWindow("minute", now);
  const used = stored.windowStart === window.start ? stored.used : 0;
  const granted = Math.min(want, max - used);
  return { granted, stored: { ...stored, windowStart: window.start, used: used + granted } };
}

Deno.test("planLease() during a rolling upgrade: units leased ahead count in the window an old instance moved the counter into, never in a later one", () => {
  const limit = rule(100, "minute");
  const W1 = W0 + MINUTE;
  const W2 = W0 + 2 * MINUTE;
  const now = planLease(limit, 7, undefined, { now: W0 + 1_000, want: wants(10) });
  const ahead = planLease(limit, 7, now.write, { now: W0 + 59_500, ahead: true, want: wants(50) });
  assert.equal(ahead.slice.granted, 50);
  assert.deepEqual(ahead.write, { windowStart: W0, used: 10, nextUsed: 50, nextStart: W1 });
  // An old instance enters W+1 first: it grants from 0, and leaves next_used and next_start.
  const old = leaseAsOldInstance(100, ahead.write!, W1 + 100, 100);
  assert.equal(old.granted, 100);
  assert.deepEqual(old.stored, { windowStart: W1, used: 100, nextUsed: 50, nextStart: W1 });
  // The new instance counts the 50 leased ahead in W+1 (150: the bound, max + units ahead).
  assert.equal(toCounterAt(old.stored, toLimitWindow("minute", W1 + 200))?.used, 150);
  const inW1 = planLease(limit, 7, old.stored, { now: W1 + 200, want: wants(100) });
  assert.equal(inW1.slice.granted, 0);
  assert.equal(inW1.slice.used, 150);
  assert.deepEqual(inW1.write, { windowStart: W1, used: 150, ...NOTHING_AHEAD });
  // W+2 starts at 0 whether the counter was folded or not: the 50 are not carried on.
  for (const stored of [old.stored, inW1.write!]) {
    const inW2 = planLease(limit, 7, stored, { now: W2 + 100, want: wants(100) });
    assert.equal(inW2.slice.granted, 100);
    assert.deepEqual(inW2.write, { windowStart: W2, used: 100, ...NOTHING_AHEAD });
    assert.equal(toCounterAt(stored, toLimitWindow("minute", W2))?.used, 0);
  }
  // Ahead of W+2 from the counter the old instance wrote: from 0, not from the stale 50.
  let told: number | undefined;
  const aheadOfW2 = planLease(limit, 7, old.stored, {
    now: W1 + 59_500,
    ahead: true,
    want: (_rule, used) => {
      told = used;
      return 80;
    },
  });
  assert.equal(told, 0);
  assert.equal(aheadOfW2.slice.granted, 80);
  assert.deepEqual(aheadOfW2.write, { windowStart: W1, used: 150, nextUsed: 80, nextStart: W2 });
});

Deno.test("planReturn() matches units leased ahead on nextStart; after an old instance moved the counter, takes them off used", () => {
  const W1 = W0 + MINUTE;
  const unit = (windowStart: number, units: number) => ({
    limitId: 1,
    subjectId: 7,
    windowStart,
    units,
  });
  // Units leased ahead for W+1, returned while the counter still counts W: off nextUsed.
  const held: StoredCounter = { windowStart: W0, used: 10, nextUsed: 50, nextStart: W1 };
  assert.deepEqual(planReturn("minute", held, unit(W1, 20)), { ...held, nextUsed: 30 });
  // A stale nextStart (its window ended) holds nothing to return to.
  const stale: StoredCounter = { windowStart: W0, used: 10, nextUsed: 50, nextStart: W0 };
  assert.equal(planReturn("minute", stale, unit(W1, 20)), undefined);
  // An old instance moved the counter into W+1 without the 50: a return for W+1 comes off the
  // window's whole count (its 100 and the 50), and nothing is left ahead to carry.
  const moved: StoredCounter = { windowStart: W1, used: 100, nextUsed: 50, nextStart: W1 };
  assert.deepEqual(planReturn("minute", moved, unit(W1, 20)), {
    windowStart: W1,
    used: 130,
    ...NOTHING_AHEAD,
  });
});

Deno.test("planLease() ahead of a counter another server already moved into the next window grants from its used", () => {
  const stored: StoredCounter = { windowStart: W0 + MINUTE, used: 40, ...NOTHING_AHEAD };
  const plan = planLease(rule(100, "minute"), 7, stored, {
    now: W0 + 59_800,
    ahead: true,
    want: (_rule, used) => {
      assert.equal(used, 40, "want() is told what the next window has used");
      return 25;
    },
  });
  assert.deepEqual(plan.slice.window, { start: W0 + MINUTE, end: W0 + 2 * MINUTE });
  assert.equal(plan.slice.granted, 25);
  assert.equal(plan.slice.used, 65);
  assert.deepEqual(plan.write, { windowStart: W0 + MINUTE, used: 65, ...NOTHING_AHEAD });
});
