import assert from "node:assert/strict";
import {
  CONTENTION_CAP,
  createPasswordHasher,
  DUMMY_HASH,
  JOBS_PER_WORKER,
  MAX_CRASHES_IN_A_ROW,
  maxQueueFor,
  PasswordCheckAborted,
  PasswordPoolBusy,
  STARVATION_RELIEF_MS,
} from "../../src/passwords/passwords.ts";

Deno.test("createPasswordHasher() stores an argon2id PHC string with OWASP parameters", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    const hash = await hasher.hash("correct horse");
    assert.match(hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    assert.equal(await hasher.verify(hash, "correct horse"), true);
    assert.equal(await hasher.verify(hash, "correct horse "), false);
  } finally {
    hasher.close();
  }
});

Deno.test("verify() with no hash does the work and returns false", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    assert.equal(await hasher.verify(undefined, "anything"), false);
  } finally {
    hasher.close();
  }
});

Deno.test("verify() returns false for a malformed stored hash", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    assert.equal(await hasher.verify("not-a-phc-string", "x"), false);
  } finally {
    hasher.close();
  }
});

Deno.test("createPasswordHasher() runs jobs on every worker at once and answers each its own", async () => {
  const hasher = createPasswordHasher({ workers: 2, queue: 16 });
  try {
    const passwords = ["a", "b", "c", "d", "e", "f"];
    const hashes = await Promise.all(passwords.map((p) => hasher.hash(p)));
    const checks = await Promise.all(
      passwords.flatMap((
        p,
        i,
      ) => [hasher.verify(hashes[i], p), hasher.verify(hashes[(i + 1) % 6], p)]),
    );
    assert.deepEqual(checks, passwords.flatMap(() => [true, false]));
  } finally {
    hasher.close();
  }
});

Deno.test("createPasswordHasher() refuses beyond its hard cap on waiting jobs, at once", async () => {
  const hasher = createPasswordHasher({ workers: 1, queue: 1 });
  try {
    const running = hasher.hash("one");
    const queued = hasher.hash("two");
    await assert.rejects(hasher.hash("three"), (error: PasswordPoolBusy) => {
      // The login flow answers it with 503 service_busy and this Retry-After.
      assert.ok(error instanceof PasswordPoolBusy);
      assert.equal(error.retryAfterSeconds, 1);
      assert.match(error.message, /Too many logins in progress/);
      return true;
    });
    assert.match(await running, /^\$argon2id\$/);
    assert.match(await queued, /^\$argon2id\$/);
    // With the queue drained, work is accepted again.
    assert.match(await hasher.hash("four"), /^\$argon2id\$/);
  } finally {
    hasher.close();
  }
});

Deno.test("close() rejects pending and later calls", async () => {
  const hasher = createPasswordHasher({ workers: 1, queue: 4 });
  const pending = hasher.hash("x");
  hasher.close();
  await assert.rejects(pending, /closed/);
  await assert.rejects(hasher.hash("y"), /closed/);
});

Deno.test({
  name: "password workers run in the idle scheduling class, below the main thread (Linux)",
  ignore: Deno.build.os !== "linux" || !(await hasPs()),
  async fn() {
    const hasher = createPasswordHasher({ workers: 1 });
    try {
      await hasher.hash("x");
      // Reading /proc/self needs --allow-all under Deno; ps (procps) reads it for us.
      const output = await new Deno.Command("ps", {
        args: ["-L", "-o", "cls=", "-p", String(Deno.pid)],
        stdout: "piped",
      }).output();
      const classes = new TextDecoder().decode(output.stdout).trim().split(/\s+/);
      assert.ok(classes.includes("IDL"), `thread classes: ${classes.join(", ")}`);
      assert.ok(classes.includes("TS"), "the main thread keeps normal priority");
    } finally {
      hasher.close();
    }
  },
});

async function hasPs(): Promise<boolean> {
  try {
    return (await new Deno.Command("ps", { args: ["-p", "1"], stdout: "null" }).output()).success;
  } catch {
    return false;
  }
}

Deno.test("the dummy hash has the same argon2id parameters as every stored hash", async () => {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    const stored = await hasher.hash("x");
    const parameters = (hash: string) => hash.split("$").slice(1, 4).join("$");
    assert.equal(parameters(DUMMY_HASH), parameters(stored));
  } finally {
    hasher.close();
  }
});

Deno.test("verify() for an unknown user keeps answering false after a refusal for a full queue", async () => {
  const hasher = createPasswordHasher({ workers: 1, queue: 0 });
  try {
    const busy = hasher.hash("busy");
    await assert.rejects(
      hasher.verify(undefined, "x"),
      (error) => error instanceof PasswordPoolBusy,
    );
    await busy;
    assert.equal(await hasher.verify(undefined, "x"), false);
  } finally {
    hasher.close();
  }
});

Deno.test("a pool whose workers cannot start gives up after a few crashes instead of looping", async () => {
  // In a child process: each crash makes Deno print an "Uncaught (in worker)" block on
  // standard error, which would look like a failure in the test run. Here it is captured
  // and counted instead.
  const dir = await Deno.makeTempDir();
  const broken = new URL(`file://${dir}/broken_worker.ts`);
  const starts = `${dir}/starts`;
  await Deno.writeTextFile(
    broken,
    `Deno.writeTextFileSync(${JSON.stringify(starts)}, "x", { append: true });
    throw new Error("cannot start");`,
  );
  const script = `${dir}/pool.ts`;
  await Deno.writeTextFile(
    script,
    `import { createPasswordHasher } from ${
      JSON.stringify(new URL("../../src/passwords/passwords.ts", import.meta.url).href)
    };
    const hasher = createPasswordHasher({ workers: 1, queue: 16, workerUrl: new URL(${
      JSON.stringify(broken.href)
    }) });
    const jobs = Array.from({ length: 8 }, (_, i) => hasher.hash("p" + i));
    const results = await Promise.allSettled(jobs);
    const later = await hasher.hash("later").then(() => "resolved", (e) => e.message);
    await new Promise((resolve) => setTimeout(resolve, 100));
    hasher.close();
    console.log(JSON.stringify({ statuses: results.map((r) => r.status), later }));`,
  );
  try {
    const output = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--config",
        new URL("../../deno.json", import.meta.url).pathname,
        "--allow-read",
        "--allow-write",
        "--allow-env",
        "--allow-sys",
        "--allow-ffi",
        script,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(output.stdout);
    const stderr = new TextDecoder().decode(output.stderr);
    assert.equal(output.code, 0, stderr);
    const { statuses, later } = JSON.parse(stdout);
    assert.deepEqual(statuses, Array(8).fill("rejected"));
    assert.match(later, /Password worker crashed/);
    assert.equal((await Deno.readTextFile(starts)).length, MAX_CRASHES_IN_A_ROW, "workers started");
    assert.equal(
      stderr.match(/Uncaught \(in worker/g)?.length,
      MAX_CRASHES_IN_A_ROW,
      "one crash report per start, and nothing else",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a busy worker already holds its next job, so it works on while the main thread is busy", async () => {
  // A stand-in worker that answers each job at once with the wall-clock time it did so.
  await using echo = await writeWorker(
    `self.onmessage = (e) => self.postMessage({ id: e.data.id, ok: true, value: String(Date.now()) });`,
  );
  const hasher = createPasswordHasher({ workers: 1, queue: 4, workerUrl: echo.url });
  try {
    await hasher.hash("warm-up"); // the worker has started
    const jobs = Array.from({ length: JOBS_PER_WORKER + 1 }, (_, i) => hasher.hash(`p${i}`));
    const blockedUntil = Date.now() + 300;
    while (Date.now() < blockedUntil) { /* the main thread is busy: it cannot dispatch */ }
    const doneAt = (await Promise.all(jobs)).map(Number);
    assert.ok(
      doneAt[0] < blockedUntil && doneAt[1] < blockedUntil,
      "the second job was handed ahead",
    );
    assert.ok(doneAt[2] >= blockedUntil, "no more than JOBS_PER_WORKER are handed to one worker");
  } finally {
    hasher.close();
  }
});

Deno.test("a job kept waiting on a worker makes the main thread give up the CPU, until it is done", async () => {
  // A stand-in worker that takes 400 ms a job, as a starved idle-class worker would.
  await using slow = await writeWorker(
    `self.onmessage = (e) => {
      if (e.data.password !== "quick") Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 400);
      self.postMessage({ id: e.data.id, ok: true, value: "done" });
    };`,
  );
  const yields: number[] = [];
  const hasher = createPasswordHasher({
    workers: 1,
    workerUrl: slow.url,
    starvedAfterMs: 150,
    yieldCpu: (ms) => yields.push(ms),
  });
  try {
    await hasher.hash("quick"); // starts the worker (which may take long enough to count)
    yields.length = 0;
    await hasher.hash("quick");
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(yields, [], "a prompt job gives nothing up");
    await hasher.hash("slow");
    assert.ok(yields.length >= 1, "the main thread gave up the CPU while the job waited");
    assert.ok(yields.every((ms) => ms === STARVATION_RELIEF_MS));
    const after = yields.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(yields.length, after, "and stopped once it was done");
  } finally {
    hasher.close();
  }
});

Deno.test("verify() drops a queued job whose client went away, freeing its place", async () => {
  const hasher = createPasswordHasher({ workers: 1, queue: 2 });
  try {
    const hash = await hasher.hash("pw");
    const running = hasher.verify(hash, "pw"); // computing
    const ahead = hasher.verify(hash, "pw"); // handed ahead to the worker: queued, not cancellable
    const controller = new AbortController();
    const queued = hasher.verify(hash, "pw", controller.signal); // in the queue proper
    await assert.rejects(hasher.verify(hash, "pw"), (e) => e instanceof PasswordPoolBusy);
    controller.abort();
    await assert.rejects(
      queued,
      (e) => e instanceof PasswordCheckAborted,
    );
    const next = hasher.verify(hash, "pw"); // takes the place at once
    assert.deepEqual(await Promise.all([running, ahead, next]), [true, true, true]);
    const gone = new AbortController();
    gone.abort();
    await assert.rejects(hasher.verify(hash, "pw", gone.signal), /went away/);
  } finally {
    hasher.close();
  }
});

/** A stand-in worker module in a temporary directory, removed on dispose. */
async function writeWorker(source: string) {
  const dir = await Deno.makeTempDir();
  const url = new URL(`file://${dir}/worker.ts`);
  await Deno.writeTextFile(url, source);
  return { url, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

/** A stand-in worker that takes `ms` per job (as a hash would), answering "done". */
function writeTimedWorker(ms: number) {
  return writeWorker(
    `self.onmessage = (e) => {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${ms});
      self.postMessage({ id: e.data.id, ok: true, value: "done" });
    };`,
  );
}

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
