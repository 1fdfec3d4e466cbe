/**
 * The password hasher's admission (src/passwords/admission.ts): queue bounds from measured
 * hash times, CPU time against wall time, and the queue's cap.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  CONTENTION_CAP,
  createPasswordHasher,
  JOBS_PER_WORKER,
  maxQueueFor,
  PasswordPoolBusy,
} from "../../src/passwords/passwords.ts";
import { writeTimedWorker, writeWorker } from "../_helpers/stand_in_worker.ts";

Deno.test("createPasswordHasher() queues jobs while their expected wait is within the bound, and refuses the rest with the queue's drain time", async () => {
  await using timed = await writeTimedWorker(100);
  // 100 ms a hash on one worker, a bound of 2 s: the job expected to end at 2 s is the last in.
  const hasher = createPasswordHasher({
    workers: 1,
    maxWaitMs: 2000,
    initialHashMs: 100,
    workerUrl: timed.url,
  });
  try {
    const started = performance.now();
    const jobs = Array.from({ length: 25 }, (_, i) =>
      hasher.hash(`p${i}`).then(
        () => ({ ok: true, ms: performance.now() - started }),
        (error) => ({ ok: false, error }),
      ));
    const results = await Promise.all(jobs);
    const done = results.filter((result) => result.ok);
    const refused = results.filter((result) => !result.ok);
    assert.equal(done.length, 20);
    assert.equal(refused.length, 5);
    for (const result of refused) {
      const error = (result as { error: PasswordPoolBusy }).error;
      assert.ok(error instanceof PasswordPoolBusy);
      assert.match(error.message, /Too many logins in progress/);
      // 20 jobs out × 100 ms ÷ 1 worker: the queue is expected to be empty in 2 s.
      assert.equal(error.retryAfterSeconds, 2);
    }
    // Each admitted job ended within the bound, counted from the worker's start (its first answer),
    // give or take each job's messaging on a loaded machine.
    const ends = done.map((result) => (result as { ms: number }).ms);
    assert.ok(Math.max(...ends) - Math.min(...ends) < 2000 + 500, `${ends}`);
    // Drained, the pool admits again.
    assert.equal(await hasher.hash("again"), "done");
  } finally {
    hasher.close();
  }
});

Deno.test("createPasswordHasher() estimates from measured hash times, and an idle worker always takes a job", async () => {
  await using timed = await writeTimedWorker(100);
  const hasher = createPasswordHasher({
    workers: 1,
    maxWaitMs: 1000,
    initialHashMs: 10, // far too optimistic: measurement must correct it
    workerUrl: timed.url,
  });
  try {
    assert.equal(hasher.readQueue().hashMs, 10);
    for (let i = 0; i < 4; i++) await hasher.hash("x"); // the first (the worker's start) not counted
    const { hashMs, out } = hasher.readQueue();
    assert.equal(out, 0);
    // The first measured time replaced the seed, and every job took at least 100 ms.
    assert.ok(hashMs >= 100, `measured ${hashMs}`);
    // With at least 100 ms a hash, the bound of 1 s admits at most 10 jobs of a burst, where the
    // seed of 10 ms would have admitted 100.
    const burst = Array.from({ length: 100 }, () => hasher.hash("y").then(() => true, () => false));
    const admitted = (await Promise.all(burst)).filter(Boolean).length;
    assert.ok(admitted <= 10, `admitted ${admitted}`);
  } finally {
    hasher.close();
  }
  const slow = createPasswordHasher({
    workers: 1,
    maxWaitMs: 1000,
    initialHashMs: 100_000, // hashes believed to take far longer than the bound
    workerUrl: timed.url,
  });
  try {
    const first = slow.hash("x"); // the idle worker takes it anyway
    await assert.rejects(slow.hash("y"), (error: PasswordPoolBusy) => {
      assert.equal(error.retryAfterSeconds, 100); // 1 job out × 100 s
      return true;
    });
    assert.equal(await first, "done");
  } finally {
    slow.close();
  }
});

Deno.test("createPasswordHasher() counts a real worker's first hash, timed on the worker", async () => {
  const hasher = createPasswordHasher({ workers: 1, initialHashMs: 1_000_000 });
  try {
    await hasher.hash("x"); // also starts the worker, whose start the worker's timing leaves out
    const { hashMs } = hasher.readQueue();
    assert.ok(hashMs > 0 && hashMs < 1_000_000, `measured ${hashMs}`);
  } finally {
    hasher.close();
  }
});

Deno.test("createPasswordHasher() counts a hash's wall time only up to CONTENTION_CAP × its CPU time, and Retry-After all of it", async () => {
  // A stand-in worker whose jobs report 1 s of wall time for 100 ms of CPU: a starved worker.
  await using starved = await writeWorker(
    `self.onmessage = (e) => self.postMessage({
      id: e.data.id, ok: true, value: "done", ms: 1000, cpuMs: 100,
    });`,
  );
  const hasher = createPasswordHasher({ workers: 1, maxWaitMs: 1000, workerUrl: starved.url });
  try {
    await hasher.hash("x");
    const state = hasher.readQueue();
    assert.equal(state.cpuMs, 100);
    assert.equal(state.wallMs, 1000);
    assert.equal(state.hashMs, CONTENTION_CAP * 100);
    // 200 ms a hash for admission: the idle worker takes one, then 4 more fit within 1 s (5 × 200
    // ms), where the wall time (1 s) would have admitted none beyond the idle worker's.
    const jobs = Array.from({ length: 8 }, () => hasher.hash("y").then(() => "ok", (e) => e));
    assert.equal(hasher.findRefusal(), 5, "refused with the wall time: 5 jobs out × 1 s");
    const results = await Promise.all(jobs);
    assert.equal(results.filter((r) => r === "ok").length, 5);
    for (const refused of results.filter((r) => r !== "ok")) {
      assert.ok(refused instanceof PasswordPoolBusy);
      assert.equal(refused.retryAfterSeconds, 5);
    }
  } finally {
    hasher.close();
  }
  // A worker slowed less than CONTENTION_CAP: admission follows its wall time exactly.
  await using busy = await writeWorker(
    `self.onmessage = (e) => self.postMessage({
      id: e.data.id, ok: true, value: "done", ms: 150, cpuMs: 100,
    });`,
  );
  const slowed = createPasswordHasher({ workers: 1, workerUrl: busy.url });
  try {
    await slowed.hash("x");
    assert.equal(slowed.readQueue().hashMs, 150);
  } finally {
    slowed.close();
  }
});

Deno.test("a real password worker reports its hash's CPU time, at most its wall time", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    await hasher.hash("x");
    const { cpuMs, wallMs } = hasher.readQueue();
    assert.ok(cpuMs > 0 && cpuMs <= wallMs + 1, `CPU ${cpuMs} ms, wall ${wallMs} ms`);
  } finally {
    hasher.close();
  }
});

Deno.test("maxQueueFor() caps the queue at what could end within the bound at 5 ms a hash", () => {
  assert.equal(maxQueueFor(2, 5000), 2000);
  assert.equal(maxQueueFor(1, 1000), 200);
  assert.equal(maxQueueFor(4, 1), 4 * JOBS_PER_WORKER);
  const hasher = createPasswordHasher({ workers: 2, maxWaitMs: 5000 });
  assert.deepEqual(hasher.readQueue(), {
    out: 0,
    hashMs: 20,
    cpuMs: 20,
    wallMs: 20,
    maxWaitMs: 5000,
    maxQueue: 2000,
  });
  hasher.close();
});
