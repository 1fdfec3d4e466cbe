/**
 * A batch of leases (docs/architecture.md, "Leases in batches") whose store call fails for a
 * reason other than the store being unreachable (a limit deleted under it, say) is retried in
 * halves: only the failing key's requests get the error, the others of its batch are admitted;
 * and a failure of every key costs a bounded number of store calls, not one per key.
 *
 * @module
 */
import assert from "node:assert/strict";
import { limitChangeDeps } from "./_limits.ts";
import { createLimiter } from "../../src/auth/limiter.ts";
import { toSplitBudget } from "../../src/auth/limit_split.ts";
import { setLimit } from "../../src/auth/limits.ts";
import { StoreError } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import { createTestApp, type TestApp } from "../_helpers/test_app.ts";

/** Alice's `count` keys, in the order of their ids, under a default rate of 1,000 a minute. */
async function setUpKeys(app: TestApp, count: number) {
  const userId = await app.addUser("alice@example.org", "pw");
  for (let i = 0; i < count; i++) await app.createKey(userId);
  await setLimit(limitChangeDeps(app), { scope: "default" }, {
    kind: "rate",
    max: 1000,
    period: "minute",
  });
  const owners = (await app.store.listApiKeys(userId)).map((key) => ({ apiKeyId: key.id, userId }))
    .sort((a, b) => a.apiKeyId - b.apiKeyId);
  assert.equal(owners.length, count);
  return owners;
}

Deno.test("limiter: one key's failing lease fails only that key, not the others of its batch", async () => {
  await using app = await createTestApp();
  const owners = await setUpKeys(app, 4);
  const broken = owners[2].apiKeyId;
  const calls: number[][] = [];
  const store: Store = Object.assign(Object.create(app.store), {
    async leaseLimits(requests: Parameters<Store["leaseLimits"]>[0]) {
      calls.push(requests.map((request) => request.apiKeyId));
      if (requests.some((request) => request.apiKeyId === broken)) {
        throw new StoreError("a counter of a limit deleted meanwhile");
      }
      return await app.store.leaseLimits(requests);
    },
  });
  const limiter = createLimiter({ store, clock: app.clock, leaseAhead: true });
  const outcomes = await Promise.allSettled(owners.map((owner) => limiter.admit(owner)));
  // One call for the batch, then its halves, then the failing half's halves.
  const ids = owners.map((o) => o.apiKeyId);
  assert.deepEqual(calls, [ids, ids.slice(0, 2), ids.slice(2), [ids[2]], [ids[3]]]);
  outcomes.forEach((outcome, i) => {
    if (owners[i].apiKeyId === broken) {
      assert.equal(outcome.status, "rejected");
      assert.ok((outcome as PromiseRejectedResult).reason instanceof StoreError);
    } else {
      assert.equal(outcome.status, "fulfilled", `key ${owners[i].apiKeyId} admitted`);
    }
  });
  // The admitted keys' units came from their own counters.
  for (const owner of owners.filter((o) => o.apiKeyId !== broken)) {
    const [usage] = await app.store.listLimitUsage(owner, app.clock.now());
    assert.ok(usage.used >= 1, `key ${owner.apiKeyId} leased`);
  }
});

Deno.test("limiter: a lease failing for every key of a batch fails them all in 4 store calls, not one per key", async () => {
  await using app = await createTestApp();
  const owners = await setUpKeys(app, 8);
  const calls: number[] = [];
  const store: Store = Object.assign(Object.create(app.store), {
    leaseLimits(requests: Parameters<Store["leaseLimits"]>[0]) {
      calls.push(requests.length);
      return Promise.reject(new StoreError("a broken schema"));
    },
  });
  const limiter = createLimiter({ store, clock: app.clock, leaseAhead: true });
  const outcomes = await Promise.allSettled(owners.map((owner) => limiter.admit(owner)));
  // The batch, its halves (failing alike), one key alone (failing alike too: the whole batch).
  assert.deepEqual(calls, [8, 4, 4, 1]);
  for (const outcome of outcomes) {
    assert.equal(outcome.status, "rejected");
    assert.ok((outcome as PromiseRejectedResult).reason instanceof StoreError);
  }
  await limiter.stop();
});

Deno.test("limiter: two keys failing alike, one in each half of a batch, fail only themselves", async () => {
  await using app = await createTestApp();
  const owners = await setUpKeys(app, 8);
  const ids = owners.map((o) => o.apiKeyId);
  const broken = new Set([ids[2], ids[6]]);
  const calls: number[][] = [];
  const store: Store = Object.assign(Object.create(app.store), {
    async leaseLimits(requests: Parameters<Store["leaseLimits"]>[0]) {
      calls.push(requests.map((request) => request.apiKeyId));
      if (requests.some((request) => broken.has(request.apiKeyId))) {
        throw new StoreError("a counter of a limit deleted meanwhile");
      }
      return await app.store.leaseLimits(requests);
    },
  });
  const limiter = createLimiter({ store, clock: app.clock, leaseAhead: true });
  const outcomes = await Promise.allSettled(owners.map((owner) => limiter.admit(owner)));
  assert.deepEqual(calls, [
    ids,
    ids.slice(0, 4),
    ids.slice(4),
    // Both halves failed alike: one key alone is served, so the halves are split further.
    [ids[0]],
    ids.slice(1, 3),
    [ids[3]],
    [ids[1]],
    [ids[2]],
    ids.slice(4, 6),
    ids.slice(6),
    [ids[6]],
    [ids[7]],
  ]);
  assert.ok(calls.length - 1 <= toSplitBudget(8), "within the retries' budget");
  outcomes.forEach((outcome, i) => {
    if (broken.has(ids[i])) {
      assert.equal(outcome.status, "rejected", `key ${ids[i]} failed`);
      assert.ok((outcome as PromiseRejectedResult).reason instanceof StoreError);
    } else assert.equal(outcome.status, "fulfilled", `key ${ids[i]} admitted`);
  });
  for (const owner of owners.filter((o) => !broken.has(o.apiKeyId))) {
    const [usage] = await app.store.listLimitUsage(owner, app.clock.now());
    assert.ok(usage.used >= 1, `key ${owner.apiKeyId} leased`);
  }
  await limiter.stop();
});

Deno.test("limiter: a batch failing with a different message each call stops retrying after 4 log2 N + 3 calls", async () => {
  await using app = await createTestApp();
  const owners = await setUpKeys(app, 16);
  let calls = 0;
  const store: Store = Object.assign(Object.create(app.store), {
    leaseLimits() {
      calls++;
      return Promise.reject(new StoreError(`a broken counter (call ${calls})`));
    },
  });
  const limiter = createLimiter({ store, clock: app.clock, leaseAhead: true });
  const outcomes = await Promise.allSettled(owners.map((owner) => limiter.admit(owner)));
  assert.equal(toSplitBudget(16), 19);
  assert.equal(calls, 1 + 19, "the batch, then the budget: not 2N - 1 = 31 more");
  for (const outcome of outcomes) {
    assert.equal(outcome.status, "rejected");
    assert.ok((outcome as PromiseRejectedResult).reason instanceof StoreError);
  }
  await limiter.stop();
});
