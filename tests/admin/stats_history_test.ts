import assert from "node:assert/strict";
import type { AdminStats } from "../../src/auth/admin_tasks.ts";
import { createStatsHistory } from "../../src/auth/stats_history.ts";
import { createCapturingLogger } from "../_helpers/capturing_logger.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";

function stats(at: number, users: number): AdminStats {
  return {
    at,
    users,
    apiKeys: 0,
    liveTokens: 0,
    throttledSubjects: 0,
    counters: {
      tokensIssued: 0,
      loginFailures: 0,
      throttled: 0,
      secureAllowed: 0,
      secureDenied: 0,
    },
  };
}

Deno.test("createStatsHistory() keeps the newest samples, oldest first, and skips failed reads", async () => {
  const clock = createFakeClock(0);
  const { logger, lines } = createCapturingLogger();
  let n = 0;
  const history = createStatsHistory({
    read: () => {
      n++;
      if (n === 3) return Promise.reject(new Error("database is locked"));
      return Promise.resolve(stats(clock.now(), n));
    },
    clock,
    logger,
    size: 3,
  });
  for (let i = 0; i < 5; i++) {
    await history.sampleNow();
    clock.advance(60_000);
  }
  assert.deepEqual(history.list().map((s) => [s.at, s.users]), [
    [60_000, 2],
    [180_000, 4],
    [240_000, 5],
  ]);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /"msg":"dashboard sample failed".*database is locked/);
  assert.equal(history.intervalMs, 60_000);
});

Deno.test("createStatsHistory() samples at start and every interval until stopped", async () => {
  let reads = 0;
  const history = createStatsHistory({
    read: () => Promise.resolve(stats(++reads, reads)),
    clock: createFakeClock(),
    intervalMs: 20,
  });
  history.start();
  history.start(); // idempotent
  await new Promise((resolve) => setTimeout(resolve, 70));
  history.stop();
  const taken = reads;
  assert.ok(taken >= 3 && taken <= 5, `took ${taken} samples`);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(reads, taken, "no sample after stop()");
});
