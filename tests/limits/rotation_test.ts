/**
 * A thread's limiter across a key's rotation (docs/architecture.md, "Rotation"): the store moves
 * the key's limits and counters to the successor, and the limiter gives back what the old key's
 * entry held at once when it learns the change, and a rotated key's idle units after a second
 * whether or not the budget is contested (its traffic moves to the successor). On the backend under
 * test, with the fake clock.
 *
 * @module
 */
import assert from "node:assert/strict";
import { IDLE_RETURN_MS } from "../../src/auth/limit_slots.ts";
import { createLimiter } from "../../src/auth/limiter.ts";
import { rotateKey } from "../../src/auth/keys.ts";
import { setLimit } from "../../src/auth/limits.ts";
import type { Store } from "../../src/store/store.ts";
import type { TestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";

const QUOTA = 1_000;

/** Alice's key with a quota of its own, and a second key of hers with one too. */
async function setUp() {
  const set = await setUpLimitsApp();
  const { app, userId, keyId } = set;
  await app.createKey(userId);
  const otherId = (await app.store.listApiKeys(userId)).find((k) => k.id !== keyId)!.id;
  for (const id of [keyId, otherId]) {
    await setLimit(limitChangeDeps(app), { scope: "key", key: { id } }, {
      kind: "quota",
      max: QUOTA,
      period: "none",
    });
  }
  return { ...set, otherId };
}

/** What the store says a key's quota has used (leased by threads). */
async function usedOf(store: Store, apiKeyId: number, now: number): Promise<number> {
  const [usage] = await store.listLimitUsage({ apiKeyId, userId: 0 }, now);
  return usage.used;
}

async function rotate(app: TestApp, keyId: number) {
  const key = (await app.store.findApiKeyById(keyId))!;
  return await rotateKey(limitChangeDeps(app), key, 3600);
}

Deno.test("limiter: when it learns a key's rotation it gives the old entry's units back at once, to the successor's counter", async () => {
  const { app, userId, keyId } = await setUp();
  using _ = app;
  const limiter = createLimiter({ store: app.store, clock: app.clock, leaseAhead: true });
  const owner = { apiKeyId: keyId, userId };
  await limiter.admit(owner);
  const held = limiter.readUnitsInHand(keyId);
  assert.ok(held > 1, `a first slice of ${held}`);
  assert.equal(await usedOf(app.store, keyId, app.clock.now()), 1 + held);
  const { key: successor } = await rotate(app, keyId);
  // The next request learns the change: the entry is dropped and its units go back now (no idle
  // return runs: the limiter was not started), then a new entry leases from the successor's.
  await limiter.admit(owner);
  const inHand = limiter.readUnitsInHand(keyId);
  const settled = async () => await usedOf(app.store, successor.id, app.clock.now()) === 2 + inHand;
  for (let waited = 0; !await settled(); waited++) {
    assert.ok(waited < 1000, `units not given back: ${await usedOf(app.store, successor.id, 0)}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  // The old key reads the same counter.
  assert.equal(await usedOf(app.store, keyId, app.clock.now()), 2 + inHand);
  await limiter.stop();
  assert.equal(await usedOf(app.store, successor.id, app.clock.now()), 2);
});

Deno.test("limiter: a rotated key's idle units go back after a second though its budget is not contested; another key keeps its own", async () => {
  const { app, userId, keyId, otherId } = await setUp();
  using _ = app;
  const limiter = createLimiter({ store: app.store, clock: app.clock, leaseAhead: true });
  const { key: successor } = await rotate(app, keyId);
  const old = { apiKeyId: keyId, userId };
  const other = { apiKeyId: otherId, userId };
  for (const owner of [old, other]) await limiter.admit(owner);
  assert.ok(limiter.readUnitsInHand(keyId) > 0);
  const otherHeld = limiter.readUnitsInHand(otherId);
  assert.ok(otherHeld > 0);
  // Less than half of either budget is leased: uncontested.
  assert.ok(await usedOf(app.store, successor.id, app.clock.now()) * 2 < QUOTA);
  app.clock.advance(IDLE_RETURN_MS);
  await limiter.flush();
  assert.equal(limiter.readUnitsInHand(keyId), 0);
  assert.equal(await usedOf(app.store, successor.id, app.clock.now()), 1);
  // A key that was not rotated keeps its idle units (they matter only where the budget is
  // contested).
  assert.equal(limiter.readUnitsInHand(otherId), otherHeld);
  assert.equal(await usedOf(app.store, otherId, app.clock.now()), 1 + otherHeld);
  await limiter.stop();
});
