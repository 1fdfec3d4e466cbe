/**
 * Leases ahead (docs/architecture.md, "Exact limits across workers and instances"): a key used
 * in the last part of its window leases its next window's units in the background, so that after
 * the boundary its requests admit from units in hand without a store call; the units leased ahead
 * go back at stop and through the idle return; a failing lease ahead refuses nothing. On the
 * backend under test, with the fake clock and a store wrapper that records (or fails) the leases.
 *
 * @module
 */
import assert from "node:assert/strict";
import { markAheadDue } from "../../src/auth/limit_ahead.ts";
import { rollSlot, type Slot } from "../../src/auth/limit_slots.ts";
import { toLimitPolicy } from "../../src/auth/limit_status.ts";
import { createLimiter } from "../../src/auth/limiter.ts";
import { setLimit } from "../../src/auth/limits.ts";
import { LimitExceeded } from "../../src/auth/limit_status.ts";
import { StoreError, StoreUnavailable } from "../../src/store/errors.ts";
import type { LimitLeaseRequest, Store } from "../../src/store/store.ts";
import { toLimitWindow } from "../../src/store/store_limits.ts";
import type { TestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";

/** The store under test, recording each lease call (whether ahead) and failing ahead ones on demand. */
function recording(store: Store) {
  const state = { calls: [] as ("now" | "ahead")[], failAhead: undefined as Error | undefined };
  const wrapped: Store = Object.assign(Object.create(store), {
    leaseLimits(requests: readonly LimitLeaseRequest[]) {
      const ahead = requests.some((r) => r.ahead === true);
      state.calls.push(ahead ? "ahead" : "now");
      if (ahead && state.failAhead !== undefined) return Promise.reject(state.failAhead);
      return store.leaseLimits(requests);
    },
  });
  return { store: wrapped, state };
}

function limiterOver(app: TestApp, leaseAhead = true) {
  const counted = { waits: 0, unavailable: 0, warnings: [] as string[] };
  const { store, state } = recording(app.store);
  const limiter = createLimiter({
    store,
    clock: app.clock,
    leaseAhead,
    logger: { warn: (message) => void counted.warnings.push(message) },
    metrics: {
      limitedRequest: () => {},
      limitStoreUnavailable: () => counted.unavailable++,
      limitLeaseWait: () => counted.waits++,
    },
  });
  return { limiter, state, counted };
}

async function setUpMinuteRate(max: number) {
  const set = await setUpLimitsApp();
  await setLimit(limitChangeDeps(set.app), { scope: "key", key: { id: set.keyId } }, {
    kind: "rate",
    max,
    period: "minute",
  });
  const window = toLimitWindow("minute", set.app.clock.now() + 60_000);
  set.app.clock.set(window.start + 10_000);
  return { ...set, owner: { apiKeyId: set.keyId, userId: set.userId }, window };
}

const usedAt = async (app: TestApp, owner: { apiKeyId: number; userId: number }, now: number) =>
  (await app.store.listLimitUsage(owner, now))[0].used;

Deno.test("limiter: a request near a window's end leases the next window's units once, in the background; after the boundary requests admit with no store call", async () => {
  const { app, owner, window, keyId } = await setUpMinuteRate(1_000);
  using _ = app;
  const { limiter, state, counted } = limiterOver(app);
  for (let i = 0; i < 3; i++) await limiter.admit(owner);
  assert.deepEqual(state.calls, ["now"]);
  assert.equal(counted.waits, 1);

  app.clock.set(window.end - 500);
  const near = limiter.admit(owner);
  assert.ok(!(near instanceof Promise), "the request does not wait for the lease ahead");
  assert.ok(!(limiter.admit(owner) instanceof Promise));
  await limiter.settle();
  assert.deepEqual(state.calls, ["now", "ahead"], "exactly one lease ahead");
  const ahead = limiter.readUnitsAhead(keyId);
  assert.ok(ahead >= 1, `units leased ahead: ${ahead}`);
  assert.equal(await usedAt(app, owner, window.end), ahead, "counted against the next window");
  assert.equal(await usedAt(app, owner, window.end - 400), limiter.readUnitsInHand(keyId) + 5);

  app.clock.set(window.end + 20);
  const calls = limiter.readLeaseCalls();
  for (let i = 0; i < Math.min(ahead, 3); i++) {
    const statuses = limiter.admit(owner);
    assert.ok(!(statuses instanceof Promise), "admitted from the units leased ahead");
    assert.equal(statuses.remaining[0], 1_000 - ahead + limiter.readUnitsInHand(keyId));
  }
  assert.equal(limiter.readLeaseCalls(), calls, "no store call after the boundary");
  assert.equal(counted.waits, 1, "no request waited for a lease");
  assert.equal(limiter.readUnitsAhead(keyId), 0);

  // A clean stop gives back what the new window's units in hand did not spend.
  await limiter.stop();
  assert.equal(await usedAt(app, owner, window.end + 30), Math.min(ahead, 3));
});

Deno.test("limiter: units leased ahead go back at stop, to the next window", async () => {
  const { app, owner, window, keyId } = await setUpMinuteRate(1_000);
  using _ = app;
  const { limiter, state } = limiterOver(app);
  await limiter.admit(owner);
  await limiter.admit(owner);
  app.clock.set(window.end - 200);
  await limiter.admit(owner);
  await limiter.settle();
  assert.deepEqual(state.calls, ["now", "ahead"]);
  assert.ok(limiter.readUnitsAhead(keyId) >= 1);
  await limiter.stop();
  assert.equal(await usedAt(app, owner, window.end - 100), 3, "the current window: what was spent");
  assert.equal(await usedAt(app, owner, window.end), 0, "the next window: nothing left leased");
});

Deno.test("limiter: units leased ahead and unused go back through the idle return where the budget is contested", async () => {
  const { app, owner, window, keyId } = await setUpMinuteRate(40);
  using _ = app;
  const { limiter, state } = limiterOver(app);
  await limiter.admit(owner);
  await limiter.admit(owner);
  // Another server has leased most of the next window ahead: its budget is contested.
  const [[other]] = await app.store.leaseLimits([{
    ...owner,
    now: window.end - 950,
    ahead: true,
    want: () => 30,
  }]);
  assert.equal(other.granted, 30);
  app.clock.set(window.end - 900);
  await limiter.admit(owner);
  await limiter.settle();
  // The third request needs units again (a small limit's first slice is small), then leases ahead.
  assert.deepEqual(state.calls, ["now", "now", "ahead"]);
  const ahead = limiter.readUnitsAhead(keyId);
  assert.ok(ahead >= 1);
  assert.equal(await usedAt(app, owner, window.end), 30 + ahead);
  // Unused for a second (the window has turned meanwhile): given back to the window they count in.
  app.clock.set(window.end + 200);
  await limiter.flush();
  assert.equal(limiter.readUnitsInHand(keyId) + limiter.readUnitsAhead(keyId), 0);
  assert.equal(await usedAt(app, owner, window.end + 300), 30);
  await limiter.stop();
});

Deno.test("limiter: a failing lease ahead refuses nothing and opens nothing; it is logged once", async () => {
  const { app, owner } = await setUpMinuteRate(1_000);
  using _ = app;
  const { limiter, state, counted } = limiterOver(app);
  state.failAhead = new StoreError("a broken counter");
  await limiter.admit(owner);
  await limiter.admit(owner);
  for (const failure of [state.failAhead, new StoreUnavailable("database unreachable")]) {
    state.failAhead = failure;
    const end = toLimitWindow("minute", app.clock.now()).end;
    app.clock.set(end - 300);
    assert.ok(!(limiter.admit(owner) instanceof Promise));
    await limiter.settle();
    assert.equal(state.calls.at(-1), "ahead");
    app.clock.set(end + 10);
    // The boundary leases as before a lease ahead existed.
    const statuses = await limiter.admit(owner);
    assert.equal(statuses.policies.length, 1);
    assert.equal(state.calls.at(-1), "now");
  }
  assert.deepEqual(state.calls, ["now", "ahead", "now", "ahead", "now"]);
  assert.equal(counted.unavailable, 0, "no rate opened, no quota refused");
  assert.deepEqual(counted.warnings, [
    "limits: a lease in the background failed",
    "limits: the store cannot be reached; rates admit uncounted, quotas refuse",
  ]);
  await limiter.stop();
});

Deno.test("limiter: the units a lease ahead brings for a key dropped meanwhile (its limit changed) go straight back", async () => {
  const { app, owner, window } = await setUpMinuteRate(1_000);
  using _ = app;
  let entered!: () => void;
  const inAhead = new Promise<void>((resolve) => entered = resolve);
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  const store: Store = Object.assign(Object.create(app.store), {
    async leaseLimits(requests: readonly LimitLeaseRequest[]) {
      if (requests.some((r) => r.ahead === true)) {
        entered();
        await held;
      }
      return await app.store.leaseLimits(requests);
    },
  });
  const limiter = createLimiter({ store, clock: app.clock, leaseAhead: true });
  await limiter.admit(owner);
  await limiter.admit(owner);
  app.clock.set(window.end - 500);
  await limiter.admit(owner);
  await inAhead;
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: owner.apiKeyId } }, {
    kind: "rate",
    max: 2_000,
    period: "minute",
  });
  // The next request learns the change at once: the key's entry is dropped, its units in hand
  // queued back; its own lease waits for the store call under way (one at a time per thread).
  const next = limiter.admit(owner);
  release();
  await next;
  await limiter.settle();
  assert.ok((await usedAt(app, owner, window.end)) > 0, "the lease ahead was granted");
  await limiter.stop();
  assert.equal(await usedAt(app, owner, window.end - 100), 4, "the current window: 4 admitted");
  assert.equal(await usedAt(app, owner, window.end), 0, "the next window: given back");
});

Deno.test("limiter: with leaseAhead off (--limit-lease-ahead off) a key used in its window's last second leases nothing ahead", async () => {
  const { app, owner, window, keyId } = await setUpMinuteRate(1_000);
  using _ = app;
  const { limiter, state, counted } = limiterOver(app, false);
  for (let i = 0; i < 3; i++) await limiter.admit(owner);
  app.clock.set(window.end - 500);
  for (let i = 0; i < 3; i++) assert.ok(!(limiter.admit(owner) instanceof Promise));
  await limiter.settle();
  assert.deepEqual(state.calls, ["now"], "no lease ahead");
  assert.equal(limiter.readUnitsAhead(keyId), 0);
  assert.equal(await usedAt(app, owner, window.end), 0, "the next window: nothing leased");
  // After the boundary the key leases once its window has begun, as before leases ahead.
  app.clock.set(window.end + 20);
  const next = limiter.admit(owner);
  assert.ok(next instanceof Promise, "the first request of the window waits for a lease");
  await next;
  assert.deepEqual(state.calls, ["now", "now"]);
  assert.equal(counted.waits, 2);
  await limiter.stop();
});

Deno.test("limiter: a key at its limit leases ahead when a request is refused near its window's end; after the boundary it admits at once", async () => {
  const { app, owner, window, keyId } = await setUpMinuteRate(5);
  using _ = app;
  const { limiter, state } = limiterOver(app);
  for (let i = 0; i < 5; i++) await limiter.admit(owner);
  assert.deepEqual([...new Set(state.calls)], ["now"]);
  // Refused early in the window: no lease ahead is due yet.
  await assert.rejects(async () => await limiter.admit(owner), LimitExceeded);
  await limiter.settle();
  assert.ok(!state.calls.includes("ahead"));
  app.clock.set(window.end - 300);
  await assert.rejects(async () => await limiter.admit(owner), LimitExceeded);
  await limiter.settle();
  assert.equal(state.calls.at(-1), "ahead", "the refused request leased the next window ahead");
  const ahead = limiter.readUnitsAhead(keyId);
  assert.ok(ahead >= 1);
  assert.equal(await usedAt(app, owner, window.end), ahead);
  // Once per window: refused again, no second lease ahead.
  const calls = state.calls.length;
  app.clock.set(window.end - 100);
  await assert.rejects(async () => await limiter.admit(owner), LimitExceeded);
  await limiter.settle();
  assert.equal(state.calls.slice(calls).filter((call) => call === "ahead").length, 0);

  app.clock.set(window.end + 20);
  const before = limiter.readLeaseCalls();
  assert.ok(!(limiter.admit(owner) instanceof Promise), "admitted from the units leased ahead");
  assert.equal(limiter.readLeaseCalls(), before);
  await limiter.stop();
});

Deno.test("limiter: a lease ahead still queued when its window begins is dropped, not sent; requests' leases go first", async () => {
  const { app, owner, window, userId } = await setUpMinuteRate(1_000);
  using _ = app;
  // A second key under the same limit, set on the user.
  await app.createKey(userId);
  await setLimit(limitChangeDeps(app), {
    scope: "user",
    user: { id: userId, email: "alice@example.org" },
  }, {
    kind: "rate",
    max: 1_000,
    period: "minute",
  });
  const other = {
    apiKeyId: (await app.store.listApiKeys(userId)).find((key) => key.id !== owner.apiKeyId)!.id,
    userId,
  };
  const batches: string[][] = [];
  let hold: Promise<void> | undefined;
  let entered!: () => void;
  const store: Store = Object.assign(Object.create(app.store), {
    async leaseLimits(requests: readonly LimitLeaseRequest[]) {
      batches.push(
        requests.map((r) => `${r.apiKeyId === owner.apiKeyId ? "A" : "B"}${r.ahead ? "+" : ""}`),
      );
      if (hold !== undefined) {
        entered();
        await hold;
      }
      return await app.store.leaseLimits(requests);
    },
  });
  const limiter = createLimiter({ store, clock: app.clock, leaseAhead: true });
  await limiter.admit(owner);
  await limiter.admit(owner);
  app.clock.set(window.end - 600);
  // B's lease is under way (held) while A's lease ahead comes due and queues behind it.
  let release!: () => void;
  hold = new Promise<void>((resolve) => release = resolve);
  const inCall = new Promise<void>((resolve) => entered = resolve);
  const b = limiter.admit(other);
  await inCall;
  hold = undefined;
  app.clock.set(window.end - 500);
  assert.ok(!(limiter.admit(owner) instanceof Promise));
  app.clock.set(window.end + 10);
  release();
  await b;
  await limiter.settle();
  // B's request, answered after the boundary, leases again for its new window; A's lease ahead
  // (for that window, now begun) was dropped, never sent.
  assert.deepEqual(batches, [["A"], ["B"], ["B"]]);
  await limiter.stop();
});

Deno.test("markAheadDue() forgets the next window's count of an earlier lease ahead: a failed one rolls to used 0", () => {
  const rule = {
    id: 1,
    scope: "key" as const,
    subjectId: 1,
    kind: "rate" as const,
    max: 100,
    period: "minute" as const,
    createdAt: 0,
    updatedAt: 0,
  };
  const window = toLimitWindow("minute", 600_000);
  const slot: Slot = {
    rule,
    policy: toLimitPolicy({ rule, windowStart: window.start, windowEnd: window.end }),
    subjectId: 1,
    windowStart: window.start,
    windowEnd: window.end,
    local: 3,
    used: 40,
    exhaustedUntil: 0,
    openUntil: 0,
    admitted: 5,
    leasedAt: window.start,
    rate: 0.01,
    lastUseAt: window.start,
    ahead: 0,
    // An earlier window's lease ahead saw 70 used of the window after it.
    aheadStart: window.start,
    aheadUsed: 70,
  };
  const key = { slots: [slot], waiting: 0, lastUseAt: 0, aheadSpread: 0 };
  assert.equal(markAheadDue(key, window.end - 100), true);
  assert.equal(slot.aheadStart, window.end);
  // The lease ahead failed (no answer): at the boundary the slot rolls to nothing known.
  rollSlot(slot, window.end + 1);
  assert.equal(slot.local, 0);
  assert.equal(slot.used, 0, "no stale count of an earlier window");
});
