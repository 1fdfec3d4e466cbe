/**
 * The change-delay metric's tracker (src/store/postgres/change_delay.ts): a notification's
 * commit time counts once its position is learned, never for a payload without one or a
 * position not learned, and a spoofed flood cannot grow it without bound.
 */
import assert from "node:assert/strict";
import {
  createChangeDelayTracker,
  PENDING_NOTIFICATIONS,
} from "../../src/store/postgres/change_delay.ts";

function track() {
  const seen: number[] = [];
  let now = 10_000;
  const tracker = createChangeDelayTracker((ms) => seen.push(ms), () => now);
  return { tracker, seen, at: (ms: number) => (now = ms) };
}

Deno.test("change delay: counted when the poll learns the notified position", () => {
  const { tracker, seen, at } = track();
  tracker.notified("7 token:3 @9998.5", 6);
  assert.deepEqual(seen, []);
  at(10_004);
  tracker.learned(6);
  assert.deepEqual(seen, [], "position 7 is not learned yet");
  tracker.learned(8);
  assert.deepEqual(seen, [5.5]);
  tracker.learned(9);
  assert.deepEqual(seen, [5.5], "counted once");
});

Deno.test("change delay: a position learned already counts from the arrival (upper bound)", () => {
  const { tracker, seen } = track();
  tracker.notified("7 user:1 @9990", 7);
  assert.deepEqual(seen, [10]);
  // Empty scopes (a hand-made bump recorded as all) keep the same shape.
  tracker.notified("8  @9999", 9);
  assert.deepEqual(seen, [10, 1]);
});

Deno.test("change delay: payloads without a commit time, malformed or spoofed count nothing", () => {
  const { tracker, seen } = track();
  for (
    const payload of [
      "",
      "7",
      "7 token:3",
      "not a number @1",
      "-1 token:1 @9999",
      "7 token:3 @-5",
      "7 token:3 @1e400",
      "x".repeat(7000),
    ]
  ) {
    tracker.notified(payload, 0);
  }
  tracker.learned(Number.MAX_SAFE_INTEGER);
  assert.deepEqual(seen, []);
  // A clock ahead of ours never makes a negative delay.
  tracker.notified("1 token:1 @99999", 0);
  tracker.learned(1);
  assert.deepEqual(seen, [0]);
});

Deno.test("change delay: positions never learned stay bounded", () => {
  const { tracker, seen } = track();
  for (let i = 1; i <= PENDING_NOTIFICATIONS + 10; i++) {
    tracker.notified(`${1_000_000 + i} token:1 @9999`, 0);
  }
  // The oldest ten were dropped: learning them all counts only what was kept.
  tracker.learned(Number.MAX_SAFE_INTEGER);
  assert.equal(seen.length, PENDING_NOTIFICATIONS);
});

Deno.test("change delay: an own commit counts nothing, its notification before or after", () => {
  const { tracker, seen } = track();
  // The notification first (a poll had not learned it yet), then the commit is learned as own.
  tracker.notified("7 token:3 @9990", 6);
  tracker.forget(7);
  // The commit learned as own first, then its notification (already learned, or not yet).
  tracker.forget(8);
  tracker.notified("8 token:4 @9990", 8);
  tracker.forget(9);
  tracker.notified("9 token:5 @9990", 6);
  tracker.learned(9);
  assert.deepEqual(seen, []);
  // Another instance's change beside them still counts.
  tracker.notified("10 key:1 @9996", 9);
  tracker.learned(10);
  assert.deepEqual(seen, [4]);
});

Deno.test("change delay: own positions whose notification never comes stay bounded", () => {
  const { tracker, seen } = track();
  for (let i = 1; i <= PENDING_NOTIFICATIONS + 10; i++) tracker.forget(i);
  // The oldest own positions were dropped: their notifications, if they came now, would count.
  tracker.notified("1 token:1 @9999", 0);
  tracker.notified(`${PENDING_NOTIFICATIONS + 10} token:1 @9999`, 0);
  tracker.learned(Number.MAX_SAFE_INTEGER);
  assert.deepEqual(seen, [1]);
});

Deno.test("change delay: a notification tagged with this store's origin counts nothing, even learned before its write resolved", () => {
  const seen: number[] = [];
  const tracker = createChangeDelayTracker((ms) => seen.push(ms), () => 10_000, "a1b2c3");
  // The race `forget` alone left open: its poll learned the position before the write resolved.
  tracker.notified("11 token:3 @9990 #a1b2c3", 10);
  tracker.learned(11);
  tracker.notified("12 token:4 @9990 #a1b2c3", 8);
  tracker.learned(12);
  assert.deepEqual(seen, []);
  // Another store's tag, and an untagged payload (an older writer), count.
  tracker.notified("13 key:1 @9996 #ffff00", 12);
  tracker.notified("14 key:2 @9994", 12);
  tracker.learned(14);
  assert.deepEqual(seen, [4, 6]);
});
