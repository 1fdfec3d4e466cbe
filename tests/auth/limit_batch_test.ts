import assert from "node:assert/strict";
import { createLeaseBatcher, MAX_BATCH } from "../../src/auth/limit_batch.ts";

/** A batch run that records its batches and holds each open until released. */
function heldRun() {
  const batches: number[][] = [];
  const releases: (() => void)[] = [];
  const started: (() => void)[] = [];
  let nextStart = new Promise<void>((resolve) => started.push(resolve));
  return {
    batches,
    run: async (items: number[]): Promise<unknown[]> => {
      batches.push(items);
      const held = new Promise<void>((resolve) => releases.push(resolve));
      started.shift()!();
      nextStart = new Promise<void>((resolve) => started.push(resolve));
      await held;
      return items.map((item) => item < 0 ? new RangeError(`refused ${item}`) : undefined);
    },
    /** Resolves when the next batch has started. */
    started: () => nextStart,
    release: () => releases.shift()!(),
  };
}

Deno.test("createLeaseBatcher() runs the items asked in one turn as one batch", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run);
  const started = held.started();
  const leases = [1, 2, 3].map((item) => batcher.lease(item));
  await started;
  assert.deepEqual(held.batches, [[1, 2, 3]]);
  held.release();
  await Promise.all(leases);
  assert.equal(batcher.readBatches(), 1);
});

Deno.test("createLeaseBatcher() runs one batch at a time; the items asked meanwhile go next, together", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run);
  let started = held.started();
  const first = batcher.lease(1);
  await started;
  started = held.started();
  const meanwhile = [2, 3, 4].map((item) => batcher.lease(item));
  assert.deepEqual(held.batches, [[1]], "no second batch while the first is under way");
  held.release();
  await first;
  await started;
  assert.deepEqual(held.batches, [[1], [2, 3, 4]]);
  held.release();
  await Promise.all(meanwhile);
  assert.equal(batcher.readBatches(), 2);
});

Deno.test("createLeaseBatcher() takes at most MAX_BATCH items a batch", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run);
  let started = held.started();
  const leases = Array.from({ length: MAX_BATCH + 5 }, (_, i) => batcher.lease(i));
  await started;
  started = held.started();
  held.release();
  await started;
  held.release();
  await Promise.all(leases);
  assert.deepEqual(held.batches.map((batch) => batch.length), [MAX_BATCH, 5]);
  assert.equal(held.batches[1][0], MAX_BATCH, "in the order asked");
});

Deno.test("createLeaseBatcher() rejects only the items whose outcome is an error; a failed run rejects all", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run);
  const started = held.started();
  const ok = batcher.lease(1);
  const refused = batcher.lease(-1);
  await started;
  held.release();
  await ok;
  await assert.rejects(refused, { name: "RangeError", message: "refused -1" });

  const failing = createLeaseBatcher<number>(() => Promise.reject(new Error("store gone")));
  const both = [failing.lease(1), failing.lease(2)];
  for (const lease of both) await assert.rejects(lease, { message: "store gone" });
  assert.equal(failing.readBatches(), 1);
});

Deno.test("createLeaseBatcher() puts the items requests wait for first; background items fill the room left", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run, { maxBatch: 3 });
  let started = held.started();
  const first = batcher.lease(1);
  await started;
  started = held.started();
  const queued = [
    batcher.lease(100, { background: true }),
    batcher.lease(101, { background: true }),
    ...[2, 3, 4, 5].map((item) => batcher.lease(item)),
  ];
  held.release();
  await first;
  await started;
  assert.deepEqual(held.batches[1], [2, 3, 4], "the background items wait: no room");
  started = held.started();
  held.release();
  await started;
  assert.deepEqual(held.batches[2], [5, 100, 101], "one request's item, then the room filled");
  held.release();
  await Promise.all(queued);
  assert.equal(batcher.readBatches(), 3);
});

Deno.test("createLeaseBatcher() settles an item that is over without running it, foreground or background", async () => {
  const held = heldRun();
  const over = new Set<number>();
  const batcher = createLeaseBatcher(held.run, { isOver: (item) => over.has(item) });
  let started = held.started();
  const first = batcher.lease(1);
  await started;
  started = held.started();
  const ahead = [100, 101].map((item) => batcher.lease(item, { background: true }));
  const waited = batcher.lease(2);
  const dropped = batcher.lease(3);
  over.add(100);
  over.add(3);
  held.release();
  await first;
  await ahead[0];
  await dropped;
  await started;
  assert.deepEqual(held.batches, [[1], [2, 101]]);
  held.release();
  await Promise.all([waited, ahead[1]]);

  // A batch of only items that are over is no batch at all.
  over.add(102);
  await batcher.lease(102, { background: true });
  assert.equal(batcher.readBatches(), 2);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("createLeaseBatcher() lets a batch of background items only gather for gatherMs from the oldest; those asked meanwhile join it", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run, { gatherMs: 1_000 });
  const started = held.started();
  const began = performance.now();
  const leases = [batcher.lease(100, { background: true })];
  await sleep(100);
  assert.deepEqual(held.batches, [], "still gathering");
  leases.push(batcher.lease(101, { background: true }));
  await started;
  const waited = performance.now() - began;
  assert.ok(waited >= 990 && waited < 1_500, `gathered from the oldest: ${waited} ms`);
  assert.deepEqual(held.batches, [[100, 101]]);
  held.release();
  await Promise.all(leases);
});

Deno.test("createLeaseBatcher() gathers the background items asked during a batch from when they were asked, and runs a batch's worth at once", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run, { gatherMs: 300, maxBatch: 3 });
  let started = held.started();
  const first = batcher.lease(1);
  await started;
  // Asked while the batch runs, which then takes 400 ms: gathered long enough by its end.
  started = held.started();
  const during = batcher.lease(100, { background: true });
  await sleep(400);
  const ended = performance.now();
  held.release();
  await first;
  await started;
  assert.ok(performance.now() - ended < 200, "no second gathering after the batch");
  assert.deepEqual(held.batches[1], [100]);
  held.release();
  await during;

  // A batch's worth of background items does not wait for more.
  started = held.started();
  const asked = performance.now();
  const full = [101, 102, 103].map((item) => batcher.lease(item, { background: true }));
  await started;
  assert.ok(performance.now() - asked < 200, "a full batch runs at once");
  assert.deepEqual(held.batches[2], [101, 102, 103]);
  held.release();
  await Promise.all(full);
});

Deno.test("createLeaseBatcher() runs an item a request waits for at once, with the background items gathered so far, also after a batch", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run, { gatherMs: 10_000 });
  let started = held.started();
  const began = performance.now();
  const ahead = batcher.lease(100, { background: true });
  await sleep(20);
  const waited = batcher.lease(1);
  await started;
  assert.ok(performance.now() - began < 5_000, "not after the gathering time");
  assert.deepEqual(held.batches, [[1, 100]]);
  // A background item asked during that batch gathers after it; a request's item cuts it short.
  started = held.started();
  const later = batcher.lease(101, { background: true });
  held.release();
  await Promise.all([ahead, waited]);
  await sleep(20);
  assert.equal(held.batches.length, 1, "gathering");
  const cut = batcher.lease(2);
  await started;
  assert.deepEqual(held.batches[1], [2, 101]);
  held.release();
  await Promise.all([later, cut]);
  assert.equal(batcher.readBatches(), 2);
});

Deno.test("createLeaseBatcher() flushGathering() runs the background items gathering at once; later ones gather again", async () => {
  const held = heldRun();
  const batcher = createLeaseBatcher(held.run, { gatherMs: 60_000 });
  const began = performance.now();
  const first = [batcher.lease(1, { background: true }), batcher.lease(2, { background: true })];
  batcher.flushGathering();
  await held.started();
  assert.ok(performance.now() - began < 1_000, "not after a minute's gathering");
  assert.deepEqual(held.batches, [[1, 2]]);
  // One asked while the hurried batch runs was not hurried: it gathers, until hurried in turn.
  const later = batcher.lease(3, { background: true });
  held.release();
  await Promise.all(first);
  await sleep(50);
  assert.deepEqual(held.batches, [[1, 2]], "gathering again");
  const next = held.started();
  batcher.flushGathering();
  await next;
  assert.deepEqual(held.batches, [[1, 2], [3]]);
  held.release();
  await later;
  batcher.flushGathering(); // nothing gathering: no batch
  await sleep(10);
  assert.equal(batcher.readBatches(), 2);
});
