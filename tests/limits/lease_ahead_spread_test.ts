/**
 * The spread of leases ahead (docs/architecture.md, "Leases ahead"): each key's entry on a thread
 * draws its place in the last 15 s of its windows, so that the leases ahead of a boundary do not
 * all fall in its last second. On the backend under test, with the fake clock and two limiters
 * on one key as two threads would hold it, each with a fixed draw.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createLimitKeys } from "../../src/auth/limit_keys.ts";
import { createLimiter } from "../../src/auth/limiter.ts";
import { LimitExceeded } from "../../src/auth/limit_status.ts";
import { setLimit } from "../../src/auth/limits.ts";
import type { LimitLeaseRequest, Store } from "../../src/store/store.ts";
import { toLimitWindow } from "../../src/store/store_limits.ts";
import type { TestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";

/** A limiter whose keys draw `spread`, and the lease calls it made (whether ahead). */
function limiterDrawing(app: TestApp, spread: number) {
  const calls: ("now" | "ahead")[] = [];
  const store: Store = Object.assign(Object.create(app.store), {
    leaseLimits(requests: readonly LimitLeaseRequest[]) {
      calls.push(requests.some((r) => r.ahead === true) ? "ahead" : "now");
      return app.store.leaseLimits(requests);
    },
  });
  const limiter = createLimiter({
    store,
    clock: app.clock,
    leaseAhead: true,
    drawAheadSpread: () => spread,
  });
  return { limiter, calls };
}

/** Alice's key with a rate of `max` a minute, and the window after the clock's. */
async function setUpMinuteRate(max: number) {
  const { app, userId, keyId } = await setUpLimitsApp();
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "rate",
    max,
    period: "minute",
  });
  const window = toLimitWindow("minute", app.clock.now() + 60_000);
  return { app, keyId, owner: { apiKeyId: keyId, userId }, window };
}

const usedAt = async (app: TestApp, owner: { apiKeyId: number; userId: number }, now: number) =>
  (await app.store.listLimitUsage(owner, now))[0].used;

Deno.test("limiter: a key drawn at the spread's far end leases ahead 15 s before the boundary; one drawn at its near end waits for its margin", async () => {
  const { app, owner, keyId, window } = await setUpMinuteRate(10_000);
  using _ = app;
  const far = limiterDrawing(app, 1);
  const near = limiterDrawing(app, 0);
  const both = [far, near];

  /** Steady traffic on both, five a second, up to `until` before the boundary. */
  async function trafficUntil(until: number) {
    while (app.clock.now() <= window.end - until) {
      for (const { limiter } of both) {
        const statuses = limiter.admit(owner);
        if (statuses instanceof Promise) await statuses;
        await limiter.settle();
      }
      app.clock.advance(200);
    }
  }
  app.clock.set(window.end - 20_000);
  await trafficUntil(15_200);
  assert.deepEqual(far.calls, ["now"], "not before its 15 s");
  await trafficUntil(15_000);
  assert.deepEqual(far.calls, ["now", "ahead"], "the far end leased ahead 15 s before the end");
  await trafficUntil(14_000);
  assert.deepEqual(near.calls, ["now"], "the near end has not yet");
  const farAhead = far.limiter.readUnitsAhead(keyId);
  assert.ok(farAhead >= 1, `units leased ahead: ${farAhead}`);
  assert.equal(await usedAt(app, owner, window.end), farAhead, "counted against the next window");

  // In the last second (the near end's margin at five a second), the near end leases ahead too.
  app.clock.set(window.end - 800);
  for (const { limiter } of both) {
    assert.ok(!(limiter.admit(owner) instanceof Promise));
    await limiter.settle();
  }
  assert.deepEqual(near.calls, ["now", "ahead"]);
  assert.deepEqual(far.calls, ["now", "ahead"], "once per window");
  const nearAhead = near.limiter.readUnitsAhead(keyId);
  assert.equal(await usedAt(app, owner, window.end), farAhead + nearAhead);

  // After the boundary both admit from the units leased ahead, with no store call.
  app.clock.set(window.end + 20);
  for (const { limiter } of both) assert.ok(!(limiter.admit(owner) instanceof Promise));
  assert.deepEqual(far.calls, ["now", "ahead"]);
  assert.deepEqual(near.calls, ["now", "ahead"]);
  for (const { limiter } of both) await limiter.stop();
  assert.equal(await usedAt(app, owner, window.end + 30), 2, "a clean stop returns the rest");
});

Deno.test("limiter: a key refused through the spread keeps the units it leased ahead where the next window is contested; after the boundary it admits at once", async () => {
  const { app, owner, keyId, window } = await setUpMinuteRate(10);
  using _ = app;
  const { limiter, calls } = limiterDrawing(app, 1);
  const refused = async () => {
    try {
      await limiter.admit(owner);
      return false;
    } catch (error) {
      if (error instanceof LimitExceeded) return true;
      throw error;
    }
  };
  // The window's 10 spent 20 s before its end; another server holds half the next window's.
  app.clock.set(window.end - 20_000);
  for (let i = 0; i < 10; i++) assert.equal(await refused(), false);
  assert.equal(await refused(), true);
  const [[other]] = await app.store.leaseLimits([{
    ...owner,
    now: app.clock.now(),
    want: () => 5,
    ahead: true,
  }]);
  assert.equal(other.granted, 5);

  // Refused through the spread, twice a second: the first refusal in it leases ahead.
  app.clock.set(window.end - 15_000);
  assert.equal(await refused(), true);
  await limiter.settle();
  assert.equal(calls.at(-1), "ahead");
  const ahead = limiter.readUnitsAhead(keyId);
  assert.ok(ahead >= 1, `units leased ahead: ${ahead}`);
  while (app.clock.now() < window.end - 1_000) {
    app.clock.advance(500);
    assert.equal(await refused(), true);
    await limiter.flush(); // the idle return, as its timer runs it
  }
  assert.equal(limiter.readUnitsAhead(keyId), ahead, "kept: a refused request is use");

  app.clock.set(window.end + 10);
  const leased = calls.length;
  assert.ok(!(limiter.admit(owner) instanceof Promise), "admitted from the units leased ahead");
  assert.equal(calls.length, leased);
  await limiter.stop();
});

Deno.test("limiter: units leased ahead that the idle return gave back are leased ahead again when the key comes back before the boundary", async () => {
  const { app, owner, keyId, window } = await setUpMinuteRate(100);
  using _ = app;
  const { limiter, calls } = limiterDrawing(app, 1);
  // Another server holds 60 of the next window's 100: contested.
  await app.store.leaseLimits([{
    ...owner,
    now: window.start + 1_000,
    want: () => 60,
    ahead: true,
  }]);
  app.clock.set(window.end - 16_000);
  for (let i = 0; i < 10; i++) {
    await limiter.admit(owner);
    app.clock.advance(200);
  }
  await limiter.settle();
  assert.equal(calls.filter((call) => call === "ahead").length, 1);
  assert.ok(limiter.readUnitsAhead(keyId) >= 1);
  // Two idle seconds: the idle return gives them back.
  app.clock.advance(2_000);
  await limiter.flush();
  assert.equal(limiter.readUnitsAhead(keyId), 0);
  // The key comes back before the boundary: it leases ahead again.
  const before = calls.length;
  await limiter.admit(owner);
  await limiter.settle();
  assert.ok(calls.slice(before).includes("ahead"), `leased ahead again: ${calls.slice(before)}`);
  assert.ok(limiter.readUnitsAhead(keyId) >= 1);
  await limiter.stop();
});

Deno.test("createLimitKeys(): each key's entry draws its own place in the spread, and a remade entry draws again", () => {
  const draws = [0.25, 0.75, 0.5];
  const keys = createLimitKeys(() => draws.shift() ?? 1);
  assert.equal(keys.entryOf({ apiKeyId: 1, userId: 10 }, 0).aheadSpread, 0.25);
  assert.equal(keys.entryOf({ apiKeyId: 2, userId: 10 }, 0).aheadSpread, 0.75);
  assert.equal(keys.entryOf({ apiKeyId: 1, userId: 10 }, 0).aheadSpread, 0.25, "kept");
  // The key moved to another user: a new entry, a new draw.
  assert.equal(keys.entryOf({ apiKeyId: 1, userId: 11 }, 0).aheadSpread, 0.5);
});
