/**
 * `--workers N`: a request worker's hasher runs its jobs on the main thread's
 * one pool, so the pool's time-based admission is the process's, and its
 * refusal crosses with the Retry-After it computed. The two sides are wired
 * back to back here, as the worker's and the main thread's message ports are.
 */
import assert from "node:assert/strict";
import {
  createPasswordHasher,
  PasswordCheckAborted,
  PasswordPoolBusy,
} from "../../src/passwords/passwords.ts";
import {
  createRemoteHasher,
  type PasswordAnswer,
  type PasswordRequest,
  servePasswordRequests,
} from "../../src/server/remote_hasher.ts";

async function withRemote(
  options: { maxWaitMs: number; initialHashMs: number },
  fn: (remote: ReturnType<typeof createRemoteHasher>) => Promise<void>,
) {
  const dir = await Deno.makeTempDir();
  // A stand-in password worker that takes 200 ms a job.
  const workerUrl = new URL(`file://${dir}/worker.js`);
  await Deno.writeTextFile(
    workerUrl,
    `self.onmessage = (e) => {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
      self.postMessage({ id: e.data.id, ok: true, value: "done" });
    };`,
  );
  const pool = createPasswordHasher({ workers: 1, workerUrl, ...options });
  // Messages cross as structured clones, as between threads.
  const remote = createRemoteHasher({
    postMessage: (message) => main.receive(structuredClone(message) as PasswordRequest),
  });
  const main = servePasswordRequests(pool, {
    postMessage: (message) => remote.receive(structuredClone(message) as PasswordAnswer),
  });
  try {
    await fn(remote);
  } finally {
    remote.close();
    pool.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("createRemoteHasher() is refused by the main thread's pool with the Retry-After it computed", async () => {
  // Hashes believed to take 3 s, a bound of 1 s: the idle worker takes the first job, and the
  // second is refused with the first's expected 3 s (not a constant).
  await withRemote({ maxWaitMs: 1000, initialHashMs: 3000 }, async (remote) => {
    const first = remote.hash("one");
    await assert.rejects(remote.verify(undefined, "two"), (error: PasswordPoolBusy) => {
      assert.ok(error instanceof PasswordPoolBusy);
      assert.equal(error.retryAfterSeconds, 3);
      return true;
    });
    assert.equal(await first, "done");
  });
});

Deno.test("createRemoteHasher() queues within the bound, and a job whose client went away leaves the queue", async () => {
  await withRemote({ maxWaitMs: 10_000, initialHashMs: 200 }, async (remote) => {
    const computing = remote.hash("one");
    const ahead = remote.hash("two"); // handed ahead to the busy worker
    const controller = new AbortController();
    const queued = remote.verify(undefined, "three", controller.signal);
    const after = remote.hash("four");
    controller.abort();
    await assert.rejects(queued, (error) => error instanceof PasswordCheckAborted);
    assert.deepEqual(await Promise.all([computing, ahead, after]), ["done", "done", "done"]);
  });
});
