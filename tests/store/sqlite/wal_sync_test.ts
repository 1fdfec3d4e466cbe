/**
 * createWalSyncGroup(): grant-ending commits wait for a sync that started after them, and
 * share it (one in flight, at most one queued).
 *
 * @module
 */
import assert from "node:assert/strict";
import { StoreUnavailable } from "../../../src/store/errors.ts";
import { createWalSyncGroup } from "../../../src/store/sqlite/wal_sync.ts";
import { createHeldWalSync, hasSettled } from "../../_helpers/held_wal_sync.ts";

/** A group whose real sync counts its calls. */
function createCountedGroup() {
  const held = createHeldWalSync();
  let realSyncs = 0;
  const group = createWalSyncGroup(held.runWalSync, () => {
    realSyncs++;
    return Promise.resolve();
  });
  return { held, group, readRealSyncs: () => realSyncs };
}

Deno.test("createWalSyncGroup() resolves a commit only after a sync that started after it", async () => {
  const { held, group, readRealSyncs } = createCountedGroup();
  const first = group.afterCommit();
  assert.equal(held.syncs.length, 1, "nothing runs: the first commit starts a sync at once");
  assert.equal(await hasSettled(first), false);
  await held.syncs[0].release();
  await first;
  assert.equal(readRealSyncs(), 1);
  assert.equal(group.readSyncs(), 1);
  assert.equal(group.findSyncFailure(), undefined);
});

Deno.test("createWalSyncGroup() lets the commits made during a sync share the next one", async () => {
  const { held, group, readRealSyncs } = createCountedGroup();
  const first = group.afterCommit();
  const second = group.afterCommit();
  const third = group.afterCommit();
  assert.equal(held.syncs.length, 1, "the running sync may have started before their commits");
  await held.syncs[0].release();
  await first;
  assert.equal(await hasSettled(second), false, "the first sync does not answer a later commit");
  await held.waitForSyncs(2);
  const fourth = group.afterCommit(); // made during the second sync: waits for a third
  await held.syncs[1].release();
  await Promise.all([second, third]);
  assert.equal(await hasSettled(fourth), false);
  await held.waitForSyncs(3);
  await held.syncs[2].release();
  await fourth;
  assert.equal(held.syncs.length, 3);
  assert.equal(readRealSyncs(), 3);
  assert.equal(group.readSyncs(), 3, "four commits, three syncs");
});

Deno.test("createWalSyncGroup() fails every commit waiting on a failed sync, and every later one without syncing", async () => {
  const { held, group, readRealSyncs } = createCountedGroup();
  const first = group.afterCommit();
  const second = group.afterCommit();
  const third = group.afterCommit();
  held.syncs[0].fail(new Error("Input/output error (os error 5)"));
  const expected = "The database is unavailable: a sync of its write-ahead log failed " +
    "(restart keygate): Input/output error (os error 5)";
  await assert.rejects(first, (error: unknown) => {
    assert.ok(error instanceof StoreUnavailable);
    assert.equal(error.message, expected);
    return true;
  });
  assert.equal(group.findSyncFailure(), "Input/output error (os error 5)");
  // Queued behind the failed sync: no later sync would prove their commits are on disk.
  await assert.rejects(second, { name: "StoreUnavailable", message: expected });
  await assert.rejects(third, StoreUnavailable);
  await assert.rejects(group.afterCommit(), { name: "StoreUnavailable", message: expected });
  assert.equal(held.syncs.length, 1, "no sync runs after a failed one");
  assert.equal(readRealSyncs(), 0);
  assert.equal(group.readSyncs(), 1);
  assert.equal(group.findSyncFailure(), "Input/output error (os error 5)", "fatal until restart");
});
