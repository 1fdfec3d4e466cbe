/**
 * When the PostgreSQL grant watcher polls (src/store/postgres/poll_loop.ts): a notification to a
 * quiet instance polls at once; a burst costs one poll per gap, each after the last one ended, so
 * no notification is left unread and none waits longer than the gap plus the poll under way.
 */
import assert from "node:assert/strict";
import { createPollLoop, NOTIFIED_POLL_GAP_MS } from "../../src/store/postgres/poll_loop.ts";

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
