/**
 * The limiter while the store cannot be reached, on the backend under test with the fake clock:
 * a spent rate admits uncounted a second at a time, a quota (or a key whose limits are unknown)
 * refuses with 503, and a clean stop afterwards gives the units in hand back.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createLimiter } from "../../src/auth/limiter.ts";
import { setLimit } from "../../src/auth/limits.ts";
import { StoreUnavailable } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import type { TestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";

/** The store under test, whose leases fail as an unreachable database's do while `down`. */
function switchable(store: Store) {
  const state = { down: false, leases: 0 };
  const wrapped: Store = Object.assign(Object.create(store), {
    leaseLimits(request: Parameters<Store["leaseLimits"]>[0]) {
      state.leases++;
      return state.down
        ? Promise.reject(new StoreUnavailable("database unreachable"))
        : store.leaseLimits(request);
    },
  });
  return { store: wrapped, state };
}

function limiterOver(app: TestApp) {
  const counted = { limited: 0, rate: 0, quota: 0 };
  const { store, state } = switchable(app.store);
  const limiter = createLimiter({
    store,
    clock: app.clock,
    leaseAhead: true,
    metrics: {
      limitedRequest: () => counted.limited++,
      limitStoreUnavailable: (kind) => counted[kind]++,
    },
  });
  return { limiter, state, counted };
}

Deno.test("limiter: while the store is unreachable a spent rate admits uncounted, a second at a time", async () => {
  const { app, keyId, userId } = await setUpLimitsApp();
  using _ = app;
  const owner = { apiKeyId: keyId, userId };
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "rate",
    max: 1,
    period: "minute",
  });
  const { limiter, state, counted } = limiterOver(app);
  assert.equal((await limiter.admit(owner)).policies.length, 1);
  await assert.rejects(async () => await limiter.admit(owner), { code: "rate_limited" });
  app.clock.advance(60_000);
  state.down = true;
  for (let i = 0; i < 5; i++) assert.equal((await limiter.admit(owner)).policies.length, 1);
  assert.equal(counted.rate, 1, "one failed lease opens the rate for a second");
  assert.equal(state.leases, 3);
  app.clock.advance(1_000);
  await limiter.admit(owner);
  assert.equal(state.leases, 4, "then it asks the store again");
  state.down = false;
  app.clock.advance(1_000);
  await limiter.admit(owner);
  await assert.rejects(async () => await limiter.admit(owner), { code: "rate_limited" });
  assert.equal(counted.limited, 2);
});

Deno.test("limiter: while the store is unreachable a quota refuses (503), as does a key whose limits are unknown", async () => {
  const { app, keyId, userId } = await setUpLimitsApp();
  using _ = app;
  const owner = { apiKeyId: keyId, userId };
  const blind = limiterOver(app);
  blind.state.down = true;
  await assert.rejects(async () => await blind.limiter.admit(owner), StoreUnavailable);
  assert.equal(blind.counted.quota, 1);

  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "quota",
    max: 100,
    period: "month",
  });
  const { limiter, state, counted } = limiterOver(app);
  let admitted = 0;
  do {
    assert.equal((await limiter.admit(owner)).policies.length, 1);
    admitted++;
  } while (limiter.readUnitsInHand(keyId) > 0);
  state.down = true;
  for (let i = 0; i < 3; i++) {
    await assert.rejects(async () => await limiter.admit(owner), StoreUnavailable);
  }
  assert.equal(counted.quota, 3);
  state.down = false;
  const statuses = await limiter.admit(owner);
  admitted++;
  assert.equal(statuses.policies[0].name, "key-quota-month");
  assert.equal(statuses.remaining[0], 100 - admitted);
  // A clean stop gives the units in hand back: the stored count is what was admitted.
  await limiter.stop();
  const [usage] = await app.store.listLimitUsage(owner, app.clock.now());
  assert.equal(usage.used, admitted);
});
