/**
 * When the PostgreSQL grant watcher polls (src/store/postgres/poll_loop.ts): a notification to a
 * quiet instance polls at once; a burst costs one poll per gap, each after the last one ended, so
 * no notification is left unread and none waits longer than the gap plus the poll under way.
 */
import assert from "node:assert/strict";
import {
  createPollLoop,
  LATE_TIMER_MS,
  NOTIFIED_POLL_GAP_MS,
} from "../../src/store/postgres/poll_loop.ts";

function makeLoop(pollTakesMs: number, gapMs = NOTIFIED_POLL_GAP_MS) {
  const started: number[] = [];
  const ended: number[] = [];
  const loop = createPollLoop(async () => {
    started.push(performance.now());
    await new Promise((resolve) => setTimeout(resolve, pollTakesMs));
    ended.push(performance.now());
  }, { pollMs: 60_000, now: () => performance.now(), gapMs });
  return { loop, started, ended };
}

const until = async (what: string, done: () => boolean, ms = 2000) => {
  const deadline = performance.now() + ms;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
};

Deno.test("poll loop: a notification to a quiet instance polls at once", async () => {
  const { loop, started } = makeLoop(2);
  loop.pollSoon();
  assert.equal(started.length, 1, "started synchronously, without waiting for a timer");
  await until("the poll", () => started.length === 1);
  await loop.close();
});

Deno.test("poll loop: a burst costs one more poll, a gap after the one under way", async () => {
  const gapMs = 20;
  const { loop, started, ended } = makeLoop(10, gapMs);
  loop.pollSoon();
  for (let i = 0; i < 100; i++) loop.pollSoon(); // while the first is under way
  await until("the second poll", () => ended.length === 2);
  assert.ok(started[1] - ended[0] >= gapMs - 1, `${started[1] - ended[0]} ms after the first`);
  // A notification right after a poll waits for the gap, then polls: nothing is left unread.
  loop.pollSoon();
  assert.equal(started.length, 2);
  await until("the third poll", () => ended.length === 3);
  assert.ok(started[2] - ended[1] >= gapMs - 1);
  await new Promise((resolve) => setTimeout(resolve, 3 * gapMs));
  assert.equal(started.length, 3, "one poll for the whole burst, one for the notification after");
  // After the gap, at once again.
  await new Promise((resolve) => setTimeout(resolve, 2 * gapMs));
  loop.pollSoon();
  assert.equal(started.length, 4);
  await loop.close();
});

Deno.test("poll loop: pollNow (a reconnect, a refresh) never waits for the gap", async () => {
  const { loop, started } = makeLoop(1, 1000);
  await loop.pollNow();
  await loop.pollNow();
  assert.equal(started.length, 2);
  loop.pollSoon(); // waits up to a second: close must not wait for it
  const closing = performance.now();
  await loop.close();
  assert.ok(performance.now() - closing < 500);
  assert.equal(started.length, 2);
});

Deno.test("poll loop: a notified poll's timer that never fires holds later notifications back only until it is late", async () => {
  let clock = 0;
  const started: number[] = [];
  const armed: number[] = [];
  const cleared: unknown[] = [];
  // Timers that never fire (the lost wake-up), on a clock the test moves.
  const loop = createPollLoop(() => {
    started.push(clock);
    return Promise.resolve();
  }, {
    pollMs: 60_000,
    now: () => clock,
    gapMs: 3,
    timers: {
      set: (_fn, ms) => {
        armed.push(ms);
        return armed.length as unknown as ReturnType<typeof setTimeout>;
      },
      clear: (id) => cleared.push(id),
    },
  });
  await loop.pollNow(); // ends at 0
  loop.pollSoon(); // within the gap: a timer for its end
  assert.deepEqual(armed, [3]);
  clock = 3 + LATE_TIMER_MS;
  loop.pollSoon(); // the timer is late, but not beyond reason: this one waits for it too
  assert.equal(started.length, 1);
  clock += 1;
  loop.pollSoon(); // beyond reason: the late timer is dropped and this notification polls
  assert.equal(started.length, 2);
  assert.deepEqual(cleared, [1]);
  await loop.close();
});

Deno.test("poll loop: notifications while a poll runs bring one notified poll after it, a gap later", async () => {
  let clock = 0;
  let fire: (() => void) | undefined;
  const { promise: release, resolve: finish } = Promise.withResolvers<void>();
  const started: number[] = [];
  const loop = createPollLoop(async () => {
    started.push(clock);
    if (started.length === 1) await release;
  }, {
    pollMs: 60_000,
    now: () => clock,
    gapMs: 3,
    timers: {
      set: (fn) => {
        fire = fn;
        return 1 as unknown as ReturnType<typeof setTimeout>;
      },
      clear: () => {},
    },
  });
  loop.pollSoon(); // quiet: polls at once
  assert.equal(started.length, 1);
  for (let i = 0; i < 50; i++) loop.pollSoon(); // a burst while it runs
  clock = 10;
  finish();
  await new Promise((resolve) => setTimeout(resolve, 0)); // the first poll has ended
  assert.equal(started.length, 1, "nothing at once: the gap has not passed");
  // The burst's one poll waits for the gap after the last poll ended, on its timer.
  assert.ok(fire !== undefined, "a timer for the burst's poll");
  const before = started.length;
  clock += 3;
  fire!();
  assert.equal(started.length, before + 1, "the burst's poll, once");
  await loop.close();
});

Deno.test("poll loop: the periodic poll runs on the loop's timers, in the background, and close clears it", async () => {
  const armed: { fn: () => void; ms: number; background?: boolean }[] = [];
  const cleared: unknown[] = [];
  let polls = 0;
  const loop = createPollLoop(() => {
    polls++;
    return Promise.resolve();
  }, {
    pollMs: 60_000,
    now: () => 0,
    timers: {
      set: (fn, ms, background) => {
        armed.push({ fn, ms, background });
        return armed.length as unknown as ReturnType<typeof setTimeout>;
      },
      clear: (id) => cleared.push(id),
    },
  });
  loop.schedule();
  assert.deepEqual(armed.map(({ ms, background }) => [ms, background]), [[60_000, true]]);
  armed[0].fn(); // the period has passed: one poll, then the next period
  await until("the periodic poll", () => armed.length === 2);
  assert.equal(polls, 1);
  assert.deepEqual([armed[1].ms, armed[1].background], [60_000, true]);
  await loop.close();
  assert.ok(cleared.includes(2), `the next period's timer is cleared: ${cleared}`);
});
