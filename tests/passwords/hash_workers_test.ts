/**
 * The password hasher's worker pool (src/passwords/hash_workers.ts): scheduling class, crash
 * loops, jobs held by a busy worker, starvation relief, queued jobs whose client went away.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  createPasswordHasher,
  JOBS_PER_WORKER,
  MAX_CRASHES_IN_A_ROW,
  PasswordCheckAborted,
  PasswordPoolBusy,
  STARVATION_RELIEF_MS,
} from "../../src/passwords/passwords.ts";
import { writeWorker } from "../_helpers/stand_in_worker.ts";

async function hasPs(): Promise<boolean> {
  try {
    return (await new Deno.Command("ps", { args: ["-p", "1"], stdout: "null" }).output()).success;
  } catch {
    return false;
  }
}

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
