/**
 * Top-ups (docs/architecture.md, "Exact limits across workers and instances"): a key with steady
 * traffic leases more of its current window in the background before its units in hand run out,
 * so that its requests do not wait for a lease in the middle of a window; where the window's
 * budget is contested it does not, and a request that runs out while a top-up is under way waits
 * for that one instead of asking again. On the backend under test, with the fake clock and a
 * store wrapper that records (or holds) the leases.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createLimiter, type Limiter } from "../../src/auth/limiter.ts";
import { setLimit } from "../../src/auth/limits.ts";
import type { LimitLeaseRequest, Store } from "../../src/store/store.ts";
import { toLimitWindow } from "../../src/store/store_limits.ts";
import { StoreError, StoreUnavailable } from "../../src/store/errors.ts";
import type { TestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";

/** A key with a per-minute rate of `max`, ten seconds into a window, and a limiter over a store
 * that records each lease call and holds the next one open while `hold` is set. */
async function setUp(max: number) {
  const set = await setUpLimitsApp();
  const { app } = set;
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: set.keyId } }, {
    kind: "rate",
    max,
    period: "minute",
  });
  const window = toLimitWindow("minute", app.clock.now() + 60_000);
  app.clock.set(window.start + 10_000);
  const state = {
    calls: 0,
    hold: undefined as Promise<void> | undefined,
    fail: undefined as Error | undefined,
    /** How long (on the fake clock) a failing call takes before it fails. */
    failAfterMs: 0,
  };
  const store: Store = Object.assign(Object.create(app.store), {
    async leaseLimits(requests: readonly LimitLeaseRequest[]) {
      state.calls++;
      if (state.hold !== undefined) await state.hold;
      if (state.fail !== undefined) {
        app.clock.advance(state.failAfterMs);
        throw state.fail;
      }
      return await app.store.leaseLimits(requests);
    },
  });
  const counted = { waits: 0, opened: 0, warnings: [] as string[] };
  const limiter = createLimiter({
    store,
    clock: app.clock,
    leaseAhead: true,
    logger: { warn: (message) => void counted.warnings.push(message) },
    metrics: {
      limitedRequest: () => {},
      limitStoreUnavailable: () => counted.opened++,
      limitLeaseWait: () => counted.waits++,
    },
  });
  const owner = { apiKeyId: set.keyId, userId: set.userId };
  return { app, limiter, state, counted, owner, window, keyId: set.keyId };
}

/** Admits `count` requests of `owner`, ten a second on the fake clock, waiting where they wait. */
async function admitEvery100Ms(
  app: TestApp,
  limiter: Limiter,
  owner: { apiKeyId: number; userId: number },
  count: number,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    const statuses = limiter.admit(owner);
    if (statuses instanceof Promise) await statuses;
    app.clock.advance(100);
  }
}

const usedAt = async (app: TestApp, owner: { apiKeyId: number; userId: number }, now: number) =>
  (await app.store.listLimitUsage(owner, now))[0].used;

Deno.test("limiter: a key with steady traffic tops up its window in the background; only its first request waits for a lease", async () => {
  // A first slice of a 64th of 6,400: 100 units, spent in 10 s at ten requests a second.
  const { app, limiter, state, counted, owner, window, keyId } = await setUp(6_400);
  using _ = app;
  let admitted = 0;
  for (let i = 0; i < 400; i++) {
    const statuses = limiter.admit(owner);
    if (statuses instanceof Promise) await statuses;
    admitted++;
    // What happens between two requests of a server: the background leases run.
    await limiter.settle();
    app.clock.advance(100);
  }
  assert.ok(app.clock.now() < window.end - 1_000, "all of it before the lease-ahead margin");
  assert.equal(counted.waits, 1, "only the first request waited");
  assert.ok(state.calls >= 4, `the 400 requests needed several slices: ${state.calls} leases`);
  // Exact as ever: the window counts what was admitted and what this thread holds.
  assert.equal(
    await usedAt(app, owner, app.clock.now()),
    admitted + limiter.readUnitsInHand(keyId),
  );
  await limiter.stop();
  assert.equal(
    await usedAt(app, owner, app.clock.now()),
    admitted,
    "a clean stop returns the rest",
  );
});

Deno.test("limiter: no top-up where the window's budget is contested; each slice is leased once out", async () => {
  const { app, limiter, state, counted, owner, window, keyId } = await setUp(100);
  using _ = app;
  // Another server holds 60 of the window's 100 units.
  const [[other]] = await app.store.leaseLimits([{
    ...owner,
    now: app.clock.now(),
    want: () => 60,
  }]);
  assert.equal(other.granted, 60);
  for (let i = 0; i < 5; i++) {
    const statuses = limiter.admit(owner);
    if (statuses instanceof Promise) await statuses;
    await limiter.settle();
    app.clock.advance(100);
  }
  // Slices of an eighth of what is left at most (4 units here): every lease was one a request
  // waited for, none ran in the background.
  assert.ok(counted.waits >= 2, `the five requests needed more than one slice: ${counted.waits}`);
  assert.equal(state.calls, counted.waits);
  assert.equal(
    await usedAt(app, owner, window.start + 20_000),
    60 + 5 + limiter.readUnitsInHand(keyId),
  );
  await limiter.stop();
});

Deno.test("limiter: a request that runs out while a top-up is under way waits for that top-up, not a lease of its own", async () => {
  const { app, limiter, state, counted, owner, keyId } = await setUp(6_400);
  using _ = app;
  // Spend the first slice (100 units) but one, ten requests a second.
  await admitEvery100Ms(app, limiter, owner, 99);
  assert.equal(limiter.readUnitsInHand(keyId), 1);
  assert.equal(state.calls, 1);
  // The 99th left one unit: a top-up started; the store answers it only once released.
  let release!: () => void;
  state.hold = new Promise<void>((resolve) => release = resolve);
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(state.calls, 2, "the top-up is under way");
  const last = limiter.admit(owner);
  assert.ok(!(last instanceof Promise), "the last unit in hand admits at once");
  const waiting = limiter.admit(owner);
  assert.ok(waiting instanceof Promise, "out of units: it waits");
  release();
  state.hold = undefined;
  await waiting;
  assert.equal(state.calls, 2, "it was admitted from the top-up's units, with no lease of its own");
  assert.equal(counted.waits, 2, "the first request, and this one");
  assert.ok(limiter.readUnitsInHand(keyId) >= 1);
  await limiter.stop();
  assert.equal(await usedAt(app, owner, app.clock.now()), 101);
});

Deno.test("limiter: a failed top-up refuses nothing, is logged once, and its key does not top up again for a second", async () => {
  const { app, limiter, state, counted, owner, keyId } = await setUp(6_400);
  using _ = app;
  await admitEvery100Ms(app, limiter, owner, 98);
  assert.equal(state.calls, 1);
  state.fail = new StoreError("a broken counter");
  // Down to its last unit: a top-up starts, and fails.
  assert.ok(!(limiter.admit(owner) instanceof Promise));
  await limiter.settle();
  assert.equal(state.calls, 2);
  assert.equal(limiter.readUnitsInHand(keyId), 1);
  assert.deepEqual(counted.warnings, ["limits: a lease in the background failed"]);
  // Within the second after it, the last unit admits and starts no other top-up.
  app.clock.advance(100);
  assert.ok(!(limiter.admit(owner) instanceof Promise));
  await limiter.settle();
  assert.equal(state.calls, 2, "no top-up for a second after a failed one");

  // Out of units while the store cannot be reached: the request's own lease opens the rate.
  state.fail = new StoreUnavailable("database unreachable");
  app.clock.advance(100);
  await limiter.admit(owner);
  assert.equal(state.calls, 3);
  assert.equal(counted.opened, 1, "the rate admits uncounted, as without top-ups");
  assert.deepEqual(counted.warnings, [
    "limits: a lease in the background failed",
    "limits: the store cannot be reached; rates admit uncounted, quotas refuse",
  ]);

  // Back, and a second on: the key leases again, and its window counts what it admitted since.
  state.fail = undefined;
  app.clock.advance(1_500);
  await limiter.admit(owner);
  await limiter.settle();
  assert.ok(state.calls >= 4);
  await limiter.stop();
});

Deno.test("limiter: a lease that fails after more than a second, the store unreachable, still opens the rate for a second from then", async () => {
  const { app, limiter, state, counted, owner } = await setUp(100);
  using _ = app;
  // Contested (another server holds 60 of 100): slices of a few units, leased once out.
  await app.store.leaseLimits([{ ...owner, now: app.clock.now(), want: () => 60 }]);
  await limiter.admit(owner);
  state.fail = new StoreUnavailable("database unreachable");
  state.failAfterMs = 2_000; // a busy SQLite file, a PostgreSQL host that does not answer
  let admitted = 1;
  while (counted.opened === 0 && admitted < 20) {
    await limiter.admit(owner); // throws if refused
    admitted++;
  }
  assert.equal(counted.opened, 1, "the rate opened");
  const calls = state.calls;
  // Open for a second from the failure: the next requests admit without a store call.
  app.clock.advance(900);
  for (let i = 0; i < 3; i++) assert.ok(!(limiter.admit(owner) instanceof Promise));
  assert.equal(state.calls, calls);
  state.fail = undefined;
  await limiter.stop();
});

Deno.test("limiter: a request waiting for a top-up that fails with the store unreachable is admitted as the rate opens", async () => {
  const { app, limiter, state, counted, owner } = await setUp(6_400);
  using _ = app;
  await admitEvery100Ms(app, limiter, owner, 99);
  // The 99th left one unit: a top-up started; the store fails it once released.
  let release!: () => void;
  state.hold = new Promise<void>((resolve) => release = resolve);
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(state.calls, 2, "the top-up is under way");
  assert.ok(!(limiter.admit(owner) instanceof Promise), "the last unit in hand");
  const waiting = limiter.admit(owner);
  assert.ok(waiting instanceof Promise, "out of units: it waits for the top-up");
  state.fail = new StoreUnavailable("database unreachable");
  state.hold = undefined;
  release();
  await waiting;
  assert.equal(state.calls, 2, "the top-up's outcome was the request's: no lease of its own");
  assert.equal(counted.opened, 1, "the rate opened");
  state.fail = undefined;
  await limiter.stop();
});
