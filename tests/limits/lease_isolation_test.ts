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
import { setLimit } from "../../src/auth/limits.ts";
import { StoreError } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import { createTestApp } from "../_helpers/test_app.ts";

Deno.test("limiter: one key's failing lease fails only that key, not the others of its batch", async () => {
  await using app = await createTestApp();
  const userId = await app.addUser("alice@example.org", "pw");
  for (let i = 0; i < 4; i++) await app.createKey(userId);
  await setLimit(limitChangeDeps(app), { scope: "default" }, {
    kind: "rate",
    max: 1000,
    period: "minute",
  });
  const owners = (await app.store.listApiKeys(userId)).map((key) => ({ apiKeyId: key.id, userId }));
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
  const limiter = createLimiter({ store, clock: app.clock });
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

Deno.test("limiter: a lease failing for every key of a batch fails them all in 3 store calls, not one per key", async () => {
  await using app = await createTestApp();
  const userId = await app.addUser("alice@example.org", "pw");
  for (let i = 0; i < 8; i++) await app.createKey(userId);
  await setLimit(limitChangeDeps(app), { scope: "default" }, {
    kind: "rate",
    max: 1000,
    period: "minute",
  });
  const owners = (await app.store.listApiKeys(userId)).map((key) => ({ apiKeyId: key.id, userId }));
  assert.equal(owners.length, 8);
  const calls: number[] = [];
  const store: Store = Object.assign(Object.create(app.store), {
    leaseLimits(requests: Parameters<Store["leaseLimits"]>[0]) {
      calls.push(requests.length);
      return Promise.reject(new StoreError("a broken schema"));
    },
  });
  const limiter = createLimiter({ store, clock: app.clock });
  const outcomes = await Promise.allSettled(owners.map((owner) => limiter.admit(owner)));
  assert.deepEqual(calls, [8, 4, 4]);
  for (const outcome of outcomes) {
    assert.equal(outcome.status, "rejected");
    assert.ok((outcome as PromiseRejectedResult).reason instanceof StoreError);
  }
  await limiter.stop();
});
