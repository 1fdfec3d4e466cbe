/**
 * The leases a limiter starts with no request waiting for them (limit_leases.ts,
 * `createBackgroundLeases`): none starts once `stop()` has begun, until `start()`; a top-up
 * still queued when its key's limits change is dropped unsent; and `stop()` waits for a lease a
 * request began meanwhile, so that its units go back too. On the backend under test, with the
 * fake clock and a store wrapper that records (or holds) the lease calls.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createLimiter, type Limiter } from "../../src/auth/limiter.ts";
import { setLimit } from "../../src/auth/limits.ts";
import type { LimitLeaseRequest, Store } from "../../src/store/store.ts";
import { toLimitWindow } from "../../src/store/store_limits.ts";
import type { TestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";

type Owner = { apiKeyId: number; userId: number };

/** Sets `max` a minute on key `keyId`. */
const setMinuteRate = (app: TestApp, keyId: number, max: number) =>
  setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "rate",
    max,
    period: "minute",
  });

/**
 * A limiter over a store that records each lease call (the keys it leased for, whether ahead) and
 * holds calls open while `hold` is set.
 */
function limiterOver(app: TestApp, options: { gatherMs?: number } = {}) {
  const state = {
    calls: [] as { keys: number[]; ahead: boolean }[],
    hold: undefined as Promise<void> | undefined,
  };
  const store: Store = Object.assign(Object.create(app.store), {
    async leaseLimits(requests: readonly LimitLeaseRequest[]) {
      state.calls.push({
        keys: requests.map((r) => r.apiKeyId!),
        ahead: requests.some((r) => r.ahead === true),
      });
      if (state.hold !== undefined) await state.hold;
      return await app.store.leaseLimits(requests);
    },
  });
  const counted = { waits: 0 };
  const limiter = createLimiter({
    store,
    clock: app.clock,
    leaseAhead: true,
    drawAheadSpread: () => 0,
    gatherMs: options.gatherMs,
    metrics: {
      limitedRequest: () => {},
      limitStoreUnavailable: () => {},
      limitLeaseWait: () => counted.waits++,
    },
  });
  return { limiter, state, counted };
}

/**
 * A user with two keys, each with 6,400 a minute, the clock 10 s into a window, and a limiter over
 * a store that records (or holds) its lease calls.
 */
async function setUpTwoKeys() {
  const { app, userId, keyId } = await setUpLimitsApp();
  await app.createKey(userId);
  const otherId = (await app.store.listApiKeys(userId)).find((key) => key.id !== keyId)!.id;
  for (const id of [keyId, otherId]) await setMinuteRate(app, id, 6_400);
  const window = toLimitWindow("minute", app.clock.now() + 60_000);
  app.clock.set(window.start + 10_000);
  return {
    app,
    keyId,
    otherId,
    owner: { apiKeyId: keyId, userId },
    other: { apiKeyId: otherId, userId },
    ...limiterOver(app),
  };
}

/** Admits `count` requests of `owner`, ten a second on the fake clock, each after the last. */
async function admitEvery100Ms(app: TestApp, limiter: Limiter, owner: Owner, count: number) {
  for (let i = 0; i < count; i++) {
    const statuses = limiter.admit(owner);
    if (statuses instanceof Promise) await statuses;
    await limiter.settle();
    app.clock.advance(100);
  }
}

const usedAt = async (app: TestApp, owner: Owner, now: number) =>
  (await app.store.listLimitUsage(owner, now))[0].used;

Deno.test("limiter: once stop() has begun no top-up or lease ahead starts, only the leases requests wait for; start() resumes the leases ahead", async () => {
  const { app, userId, keyId } = await setUpLimitsApp();
  using _ = app;
  await setMinuteRate(app, keyId, 6_400);
  const owner = { apiKeyId: keyId, userId };
  const window = toLimitWindow("minute", app.clock.now() + 60_000);
  app.clock.set(window.start + 10_000);
  const { limiter, state, counted } = limiterOver(app);
  await admitEvery100Ms(app, limiter, owner, 1);
  await limiter.stop();

  // Steady traffic after the stop: its slices (a 64th of what is left, about 98 units) run out
  // and the next request waits for a lease, where a running limiter tops up ahead of it.
  await admitEvery100Ms(app, limiter, owner, 150);
  assert.ok(
    state.calls.length >= 3,
    `the requests needed more than one slice: ${state.calls.length}`,
  );
  assert.equal(state.calls.length, counted.waits, "every lease was one a request waited for");

  // Used in its window's last second: no lease ahead either.
  app.clock.set(window.end - 500);
  await admitEvery100Ms(app, limiter, owner, 3);
  assert.ok(state.calls.every((call) => !call.ahead), "no lease ahead after stop()");
  assert.equal(limiter.readUnitsAhead(keyId), 0);

  limiter.start();
  assert.ok(!(limiter.admit(owner) instanceof Promise));
  await limiter.settle();
  assert.equal(state.calls.at(-1)?.ahead, true, "start() resumes the leases ahead");
  assert.ok(limiter.readUnitsAhead(keyId) >= 1);
  await limiter.stop();
  assert.equal(await usedAt(app, owner, window.end + 10), 0, "the units leased ahead went back");
});

Deno.test("limiter: a top-up queued behind another key's lease is dropped unsent when its key's limits change meanwhile", async () => {
  const { app, keyId, otherId, owner, other, limiter, state } = await setUpTwoKeys();
  using _ = app;

  // The first slice is 100 units: after 98 requests two are left, and no top-up is due yet.
  await admitEvery100Ms(app, limiter, owner, 98);
  assert.equal(limiter.readUnitsInHand(keyId), 2);
  assert.deepEqual(state.calls.map((call) => call.keys), [[keyId]]);

  // The other key's first lease holds the batcher; the key's top-up (due at its last unit)
  // queues behind it.
  let release!: () => void;
  state.hold = new Promise<void>((resolve) => release = resolve);
  const otherFirst = limiter.admit(other);
  assert.ok(otherFirst instanceof Promise);
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(state.calls.map((call) => call.keys), [[keyId], [otherId]]);
  assert.ok(!(limiter.admit(owner) instanceof Promise), "the next-to-last unit admits");
  assert.equal(limiter.readUnitsInHand(keyId), 1);

  // Its limit changes: the limiter learns it with the next request and drops the key's entry.
  await setMinuteRate(app, keyId, 6_401);
  const otherNext = limiter.admit(other);
  assert.equal(limiter.readUnitsInHand(keyId), 0, "the key's entry was dropped");
  release();
  state.hold = undefined;
  await otherFirst;
  await otherNext;
  await limiter.settle();
  assert.deepEqual(
    state.calls.map((call) => call.keys),
    [[keyId], [otherId]],
    "the queued top-up was never sent",
  );
  // Its unit in hand went back with the entry: the window counts the 99 admitted.
  await limiter.flush();
  assert.equal(await usedAt(app, owner, app.clock.now()), 99);
  await limiter.stop();
});

Deno.test("limiter: stop() also waits for a lease a request began while it waited, and gives that lease's units back", async () => {
  const { app, keyId, otherId, owner, other, limiter, state } = await setUpTwoKeys();
  using _ = app;

  // A request's lease is held open when stop() begins; another request (a shutdown past its
  // deadline leaves requests running) begins a lease of the other key while stop() waits.
  let release!: () => void;
  state.hold = new Promise<void>((resolve) => release = resolve);
  const first = limiter.admit(owner);
  assert.ok(first instanceof Promise);
  await new Promise((resolve) => setTimeout(resolve, 10));
  let stopped = false;
  const stopping = limiter.stop().then(() => stopped = true);
  const second = limiter.admit(other);
  assert.ok(second instanceof Promise);
  state.hold = undefined;
  release();
  await first;
  await second;
  await stopping;
  assert.ok(stopped);
  assert.deepEqual(state.calls.map((call) => call.keys), [[keyId], [otherId]]);

  // Each key's window counts its one admitted request: the rest of both slices went back.
  assert.equal(limiter.readUnitsInHand(otherId), 0, "no unit of the later lease is held");
  assert.equal(await usedAt(app, other, app.clock.now()), 1);
  assert.equal(await usedAt(app, owner, app.clock.now()), 1);
});

Deno.test("limiter: stop() runs a lease ahead still gathering for its batch at once, and gives its units back", async () => {
  const { app, userId, keyId } = await setUpLimitsApp();
  using _ = app;
  await setMinuteRate(app, keyId, 6_400);
  const owner = { apiKeyId: keyId, userId };
  const window = toLimitWindow("minute", app.clock.now() + 60_000);
  // A lease ahead gathers for a minute of real time before its batch runs, unless stop() hurries.
  const { limiter, state } = limiterOver(app, { gatherMs: 60_000 });
  app.clock.set(window.end - 500);
  const first = limiter.admit(owner); // waits for this window's lease
  if (first instanceof Promise) await first;
  app.clock.advance(100);
  assert.ok(!(limiter.admit(owner) instanceof Promise)); // in the last second: a lease ahead is due
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(state.calls.map((call) => call.ahead), [false], "the lease ahead gathers");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<string>((resolve) =>
    timer = setTimeout(() => resolve("waited"), 10_000)
  );
  const outcome = await Promise.race([limiter.stop().then(() => "stopped"), late]);
  clearTimeout(timer);
  assert.equal(outcome, "stopped", "stop() did not wait out the gathering");
  assert.deepEqual(state.calls.map((call) => call.ahead), [false, true]);
  assert.equal(limiter.readUnitsAhead(keyId), 0);
  assert.equal(await usedAt(app, owner, window.end + 10), 0, "the units leased ahead went back");
});
