/**
 * Leases ahead answered late, and keys idle across windows (docs/architecture.md, "Exact limits
 * across workers and instances"): a lease ahead answered one window after its boundary brings
 * units for the window then current, kept in hand; one answered two windows late brings units
 * of a window that has ended, never spent; and units leased ahead for a window the key never
 * reached are not spent in a later one. On the backend under test, with the fake clock and a
 * store wrapper that holds the lease ahead open.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createLimiter } from "../../src/auth/limiter.ts";
import { setLimit } from "../../src/auth/limits.ts";
import type { LimitLeaseRequest, LimitSlice, Store } from "../../src/store/store.ts";
import { toLimitWindow } from "../../src/store/store_limits.ts";
import type { TestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";

/** A key with a rate of 1,000 a minute, ten seconds into a window, and a limiter over a store
 * whose leases ahead answer only once `release` is called (when `hold` is set). */
async function setUp(hold: boolean) {
  const set = await setUpLimitsApp();
  await setLimit(limitChangeDeps(set.app), { scope: "key", key: { id: set.keyId } }, {
    kind: "rate",
    max: 1_000,
    period: "minute",
  });
  const window = toLimitWindow("minute", set.app.clock.now() + 60_000);
  set.app.clock.set(window.start + 10_000);
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  let entered!: () => void;
  const inAhead = new Promise<void>((resolve) => entered = resolve);
  const aheadSlices: LimitSlice[] = [];
  const calls: ("now" | "ahead")[] = [];
  const store: Store = Object.assign(Object.create(set.app.store), {
    async leaseLimits(requests: readonly LimitLeaseRequest[]) {
      const ahead = requests.some((r) => r.ahead === true);
      calls.push(ahead ? "ahead" : "now");
      // Leased when asked (the store's clock is the request's `now`), answered later.
      const answer = await set.app.store.leaseLimits(requests);
      if (ahead) {
        aheadSlices.push(...answer.flat());
        entered();
        if (hold) await held;
      }
      return answer;
    },
  });
  const limiter = createLimiter({ store, clock: set.app.clock, leaseAhead: true });
  const owner = { apiKeyId: set.keyId, userId: set.userId };
  return { ...set, owner, window, limiter, release, inAhead, aheadSlices, calls };
}

const usedAt = async (app: TestApp, owner: { apiKeyId: number; userId: number }, now: number) =>
  (await app.store.listLimitUsage(owner, now))[0].used;

Deno.test("limiter: a lease ahead answered after its boundary keeps its units for the window they count in, now current", async () => {
  const { app, owner, window, limiter, release, inAhead, aheadSlices, keyId, calls } = await setUp(
    true,
  );
  using _ = app;
  await limiter.admit(owner);
  await limiter.admit(owner);
  app.clock.set(window.end - 500);
  await limiter.admit(owner);
  await inAhead;
  const at = window.end + 20;
  app.clock.set(at);
  const next = limiter.admit(owner);
  assert.ok(next instanceof Promise, "waits: the units leased ahead are not in hand yet");
  release();
  await next;
  await limiter.settle();
  const granted = aheadSlices[0].granted;
  assert.ok(granted >= 2, `granted ahead: ${granted}`);
  assert.equal(aheadSlices[0].window.start, window.end);
  assert.deepEqual(calls, ["now", "ahead", "now"]);
  // The request's own lease found the units leased ahead in hand: it asked for none.
  assert.equal(limiter.readUnitsInHand(keyId), granted - 1);
  assert.equal(await usedAt(app, owner, at), granted, "the window counts the units leased ahead");
  await limiter.stop();
  assert.equal(await usedAt(app, owner, at), 1, "a clean stop gave back all but the one spent");
});

Deno.test("limiter: a lease ahead answered two windows late brings units of an ended window, never spent", async () => {
  const { app, owner, window, limiter, release, inAhead, aheadSlices, keyId } = await setUp(true);
  using _ = app;
  await limiter.admit(owner);
  await limiter.admit(owner);
  app.clock.set(window.end - 500);
  await limiter.admit(owner);
  await inAhead;
  const at = window.end + 60_000 + 20;
  app.clock.set(at);
  const next = limiter.admit(owner);
  assert.ok(next instanceof Promise);
  release();
  await next;
  await limiter.settle();
  assert.ok(aheadSlices[0].granted >= 2);
  const inHand = limiter.readUnitsInHand(keyId);
  assert.equal(limiter.readUnitsAhead(keyId), 0);
  assert.equal(
    await usedAt(app, owner, at),
    inHand + 1,
    "the window counts only its own lease: the request spent one of its units, not an old one",
  );
  await limiter.stop();
  assert.equal(await usedAt(app, owner, at), 1);
});

Deno.test("limiter: units leased ahead for a window a key skipped (idle across it) are not spent in a later one", async () => {
  const { app, owner, window, limiter, keyId, calls } = await setUp(false);
  using _ = app;
  await limiter.admit(owner);
  await limiter.admit(owner);
  app.clock.set(window.end - 500);
  await limiter.admit(owner);
  await limiter.settle();
  assert.deepEqual(calls, ["now", "ahead"]);
  assert.ok(limiter.readUnitsAhead(keyId) >= 1);
  // Idle through the whole next window (no flush: the units leased ahead are still held).
  const at = window.end + 60_000 + 20;
  app.clock.set(at);
  const next = limiter.admit(owner);
  assert.ok(next instanceof Promise, "the units of the skipped window do not admit");
  await next;
  assert.deepEqual(calls, ["now", "ahead", "now"]);
  assert.equal(limiter.readUnitsAhead(keyId), 0);
  assert.equal(await usedAt(app, owner, at), limiter.readUnitsInHand(keyId) + 1);
  await limiter.stop();
  assert.equal(await usedAt(app, owner, at), 1);
});
