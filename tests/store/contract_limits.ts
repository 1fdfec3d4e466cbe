/**
 * The store contract, part 4: limits and their counters (src/store/store_limits.ts). Pins the
 * rules that live in SQL: which limits apply to a key (its own, else the default, per kind; its
 * user's), that the leases of a window never grant more than its limit (also when many run at
 * once), windows, returns, replacement, deletion with the key or user, and the change feed.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import type { LimitRule, LimitSlice, NewLimit, Store } from "../../src/store/store.ts";
import { MAX_CHAIN_WALK, toLimitWindow } from "../../src/store/store_limits.ts";
import { TooLongChain } from "../../src/store/limit_lease.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import {
  anonymizing,
  type ContractTest,
  entry,
  NO_AUDIT,
  seed,
  seedUser,
  T0,
} from "./_contract_fixtures.ts";

const EVERYTHING = () => Number.MAX_SAFE_INTEGER;

function put(store: Store, limit: NewLimit, now = T0): Promise<LimitRule> {
  return store.putLimit(limit, { now, ...NO_AUDIT });
}

async function lease(
  store: Store,
  owner: { apiKeyId: number; userId: number },
  now: number,
  want: (rule: LimitRule, used: number) => number = EVERYTHING,
  ahead = false,
): Promise<LimitSlice[]> {
  const [slices] = await store.leaseLimits([{ ...owner, now, want, ...(ahead ? { ahead } : {}) }]);
  return slices;
}

/** A lease of the next window's units at `now`. */
function leaseAhead(
  store: Store,
  owner: { apiKeyId: number; userId: number },
  now: number,
  want: (rule: LimitRule, used: number) => number,
): Promise<LimitSlice[]> {
  return lease(store, owner, now, want, true);
}

/**
 * Rotates key `keyId` of user `userId` at `now` to a successor (secret `secret`), with an hour's
 * grace.
 */
function rotate(store: Store, keyId: number, userId: number, now: number, secret = "k2") {
  return store.rotateApiKey(keyId, {
    successor: { userId, keyHash: hashSecret(secret), prefix: secret, label: "", expiresAt: null },
    oldKeyExpiresAt: now + 3_600_000,
    now,
    ...NO_AUDIT,
  });
}

const brief = (slices: LimitSlice[]) =>
  slices.map((s) => `${s.rule.scope}/${s.rule.kind}/${s.rule.period}:${s.granted}/${s.used}`);

/** Limits as rules: set, replaced, listed and audited; which ones apply to a key. */
export function registerLimitRuleTests(test: ContractTest): void {
  test("limits: set, replaced by scope, subject, kind and period (one quota each), listed, audited", async ({ store }) => {
    const { user, key } = await seed(store);
    const rate = await store.putLimit(
      { scope: "key", subjectId: key.id, kind: "rate", max: 10, period: "second" },
      { now: T0, audit: entry("limit.set", `api_key:${key.id}`) },
    );
    assert.deepEqual(rate, {
      id: rate.id,
      scope: "key",
      subjectId: key.id,
      kind: "rate",
      max: 10,
      period: "second",
      createdAt: T0,
      updatedAt: T0,
    });
    const again = await put(store, { ...rate, max: 20 }, T0 + 5);
    assert.equal(again.id, rate.id);
    assert.equal(again.max, 20);
    assert.equal(again.updatedAt, T0 + 5);
    await put(store, { scope: "key", subjectId: key.id, kind: "rate", max: 500, period: "day" });
    const quota = await put(store, {
      scope: "key",
      subjectId: key.id,
      kind: "quota",
      max: 1000,
      period: "month",
    });
    const quota2 = await put(store, {
      scope: "key",
      subjectId: key.id,
      kind: "quota",
      max: 50,
      period: "none",
    });
    assert.equal(quota2.id, quota.id, "one quota per subject");
    await put(store, { scope: "user", subjectId: user.id, kind: "rate", max: 3, period: "minute" });
    await put(store, { scope: "default", subjectId: null, kind: "rate", max: 7, period: "second" });
    const all = await store.listLimits();
    assert.deepEqual(all.map((l) => `${l.scope}:${l.subjectId}:${l.kind}:${l.period}:${l.max}`), [
      "default:null:rate:second:7",
      `key:${key.id}:quota:none:50`,
      `key:${key.id}:rate:second:20`,
      `key:${key.id}:rate:day:500`,
      `user:${user.id}:rate:minute:3`,
    ]);
    assert.equal((await store.listLimits({ scope: "key", subjectId: key.id })).length, 3);
    assert.equal((await store.listLimits({ scope: "user" })).length, 1);
    assert.deepEqual((await store.listAudit()).map((row) => row.action), ["limit.set"]);
    await assert.rejects(
      put(store, { scope: "key", subjectId: key.id + 99, kind: "rate", max: 1, period: "second" }),
    );
  });

  test("limits: a key's own limits of a kind replace the default's; its user's always apply", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { apiKeyId: key.id, userId: user.id };
    assert.deepEqual(await lease(store, owner, T0), []);
    await put(store, { scope: "default", subjectId: null, kind: "rate", max: 7, period: "second" });
    await put(store, { scope: "default", subjectId: null, kind: "quota", max: 9, period: "none" });
    assert.deepEqual(brief(await lease(store, owner, T0, () => 1)), [
      "default/rate/second:1/1",
      "default/quota/none:1/1",
    ]);
    await put(store, { scope: "key", subjectId: key.id, kind: "rate", max: 5, period: "minute" });
    await put(store, { scope: "user", subjectId: user.id, kind: "rate", max: 4, period: "hour" });
    assert.deepEqual(brief(await lease(store, owner, T0, () => 2)).sort(), [
      "default/quota/none:2/3",
      "key/rate/minute:2/2",
      "user/rate/hour:2/2",
    ]);
  });
}

/** Leases of a window's units: never more than its limit; returns. */
export function registerLimitLeaseTests(test: ContractTest): void {
  test("limits: leases never grant more than a window allows; a new window starts afresh", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { apiKeyId: key.id, userId: user.id };
    await put(store, { scope: "key", subjectId: key.id, kind: "rate", max: 10, period: "second" });
    const start = toLimitWindow("second", T0).start;
    assert.deepEqual(brief(await lease(store, owner, start + 1, () => 6)), ["key/rate/second:6/6"]);
    let seen: number | undefined;
    const second = await lease(store, owner, start + 2, (_rule, used) => {
      seen = used;
      return 6;
    });
    assert.equal(seen, 6, "want() is told what the window has used");
    assert.deepEqual(brief(second), ["key/rate/second:4/10"]);
    assert.deepEqual(brief(await lease(store, owner, start + 999, () => 1)), [
      "key/rate/second:0/10",
    ]);
    assert.deepEqual(second[0].window, { start, end: start + 1000 });
    // The next window.
    assert.deepEqual(brief(await lease(store, owner, start + 1000, () => 3)), [
      "key/rate/second:3/3",
    ]);
    // A server whose clock lags is granted nothing from a window already past.
    assert.deepEqual(brief(await lease(store, owner, start + 999, () => 3)), [
      "key/rate/second:0/3",
    ]);
  });

  test("limits: unspent units go back to their window only, never below zero", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { apiKeyId: key.id, userId: user.id };
    const rule = await put(store, {
      scope: "key",
      subjectId: key.id,
      kind: "rate",
      max: 10,
      period: "minute",
    });
    const window = toLimitWindow("minute", T0);
    await lease(store, owner, T0, () => 8);
    await store.returnLimitUnits([
      { limitId: rule.id, subjectId: key.id, windowStart: window.start, units: 5 },
    ]);
    let [usage] = await store.listLimitUsage(owner, T0);
    assert.equal(usage.used, 3);
    // Units of an earlier window do not count against this one.
    await store.returnLimitUnits([
      { limitId: rule.id, subjectId: key.id, windowStart: window.start - 60_000, units: 2 },
      { limitId: rule.id, subjectId: key.id, windowStart: window.start, units: 50 },
    ]);
    [usage] = await store.listLimitUsage(owner, T0);
    assert.equal(usage.used, 0);
    assert.deepEqual(usage.window, window);
    // The usage of a window that has ended is 0.
    await lease(store, owner, T0, () => 4);
    [usage] = await store.listLimitUsage(owner, window.end);
    assert.equal(usage.used, 0);
  });
}

/** Leases ahead: units of a window leased before it starts, counted against it. */
export function registerLimitAheadTests(test: ContractTest): void {
  test("limits: leases ahead count against the next window, which starts with them; returns reach either window", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { apiKeyId: key.id, userId: user.id };
    const rule = await put(store, {
      scope: "key",
      subjectId: key.id,
      kind: "rate",
      max: 10,
      period: "minute",
    });
    const window = toLimitWindow("minute", T0);
    const next = toLimitWindow("minute", window.end);
    assert.deepEqual(brief(await lease(store, owner, window.start + 1, () => 6)), [
      "key/rate/minute:6/6",
    ]);
    let seen: number | undefined;
    const ahead = await leaseAhead(store, owner, window.end - 500, (_rule, used) => {
      seen = used;
      return 8;
    });
    assert.equal(seen, 0, "want() is told what the next window has used");
    assert.deepEqual(brief(ahead), ["key/rate/minute:8/8"]);
    assert.deepEqual(ahead[0].window, next);
    const usedAt = async (now: number) => (await store.listLimitUsage(owner, now))[0].used;
    assert.equal(await usedAt(window.end - 400), 6, "the current window's units are its own");
    assert.equal(await usedAt(next.start), 8, "the next window counts the units leased ahead");
    assert.deepEqual(brief(await leaseAhead(store, owner, window.end - 300, () => 5)), [
      "key/rate/minute:2/10",
    ]);
    assert.deepEqual(brief(await lease(store, owner, window.end - 200, () => 9)), [
      "key/rate/minute:4/10",
    ]);
    // Returns: to the next window (units leased ahead), to the current one.
    const give = (windowStart: number, units: number) =>
      store.returnLimitUnits([{ limitId: rule.id, subjectId: key.id, windowStart, units }]);
    await give(next.start, 3);
    await give(window.start, 2);
    assert.equal(await usedAt(window.end - 100), 8);
    assert.equal(await usedAt(next.start), 7);
    // The next window starts with the 7 units leased ahead of it.
    assert.deepEqual(brief(await lease(store, owner, next.start + 1, () => 9)), [
      "key/rate/minute:3/10",
    ]);
    // A window the counter no longer holds takes nothing back; one two ahead neither.
    await give(window.start, 5);
    await give(next.end + 60_000, 5);
    assert.equal(await usedAt(next.start + 2), 10);
    // A server whose clock lags grants nothing ahead either.
    assert.deepEqual(brief(await leaseAhead(store, owner, window.end - 50, () => 3)), [
      "key/rate/minute:0/10",
    ]);
    // Two windows on, the units leased ahead of a skipped window are gone.
    await leaseAhead(store, owner, next.end - 10, () => 4);
    assert.equal(await usedAt(next.end + 60_000), 0);
    assert.deepEqual(brief(await lease(store, owner, next.end + 60_000, () => 9)), [
      "key/rate/minute:9/9",
    ]);
  });

  test("limits: concurrent leases of a window and ahead of it never exceed its limit; a quota without refill grants nothing ahead", async ({ store }) => {
    const { user, key } = await seed(store);
    const owner = { apiKeyId: key.id, userId: user.id };
    await put(store, { scope: "key", subjectId: key.id, kind: "rate", max: 100, period: "minute" });
    await put(store, { scope: "key", subjectId: key.id, kind: "quota", max: 5, period: "none" });
    const window = toLimitWindow("minute", T0);
    const now = window.end - 300;
    const seven = (rule: LimitRule) => rule.kind === "rate" ? 7 : 0;
    const leases = await Promise.all(
      Array.from({ length: 40 }, (_, i) => lease(store, owner, now + (i % 7), seven, i % 2 === 1)),
    );
    const sum = (ahead: boolean) =>
      leases.filter((_, i) => i % 2 === Number(ahead)).flat()
        .filter((s) => s.rule.kind === "rate").reduce((n, s) => n + s.granted, 0);
    assert.equal(sum(false), 100, "the current window's grants are its limit");
    assert.equal(sum(true), 100, "the next window's grants, ahead of it, are its limit");
    const quotaAhead = leases.filter((_, i) => i % 2 === 1).flat()
      .filter((s) => s.rule.kind === "quota");
    assert.equal(quotaAhead.length, 20);
    assert.ok(quotaAhead.every((s) => s.granted === 0));
    const rateUsed = async (at: number) =>
      (await store.listLimitUsage(owner, at)).find((u) => u.rule.kind === "rate")!.used;
    assert.equal(await rateUsed(now), 100);
    assert.equal(await rateUsed(window.end), 100);
    assert.deepEqual(brief(await lease(store, owner, window.end + 1, seven)), [
      "key/rate/minute:0/100",
      "key/quota/none:0/0",
    ]);
  });
}

/**
 * Leases at once: concurrent leases of one counter, one call leasing for many keys in order, and
 * concurrent such calls; never more than a shared limit.
 */
export function registerLimitBatchLeaseTests(test: ContractTest): void {
  test("limits: concurrent leases of one counter grant exactly its limit", async ({ store }) => {
    const { user, key } = await seed(store);
    const other = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k2"), prefix: "k2", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    await put(store, {
      scope: "user",
      subjectId: user.id,
      kind: "quota",
      max: 100,
      period: "none",
    });
    const leases = await Promise.all(
      Array.from(
        { length: 40 },
        (_, i) =>
          lease(store, { apiKeyId: i % 2 ? key.id : other.id, userId: user.id }, T0, () => 3),
      ),
    );
    const granted = leases.flat().reduce((sum, s) => sum + s.granted, 0);
    assert.equal(granted, 100, "a user's quota is shared by its keys, and never exceeded");
    const [usage] = await store.listLimitUsage({ userId: user.id }, T0);
    assert.equal(usage.used, 100);
  });

  test("limits: one lease call serves many keys in order; keys sharing a counter get what is left", async ({ store }) => {
    const { user, key } = await seed(store);
    const other = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k2"), prefix: "k2", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    const stranger = await store.insertUser(
      { email: "c@d.org", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
      { now: T0, ...NO_AUDIT },
    );
    const free = await store.insertApiKey(
      { userId: stranger.id, keyHash: hashSecret("k3"), prefix: "k3", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    await put(store, { scope: "key", subjectId: key.id, kind: "rate", max: 10, period: "second" });
    await put(store, { scope: "user", subjectId: user.id, kind: "quota", max: 5, period: "none" });
    const three = () => 3;
    const answers = await store.leaseLimits([
      { apiKeyId: key.id, userId: user.id, now: T0, want: three },
      { apiKeyId: free.id, userId: stranger.id, now: T0, want: three },
      { apiKeyId: other.id, userId: user.id, now: T0, want: three },
    ]);
    assert.deepEqual(answers.map(brief), [
      ["key/rate/second:3/3", "user/quota/none:3/3"],
      [],
      ["user/quota/none:2/5"],
    ]);
    const [usage] = await store.listLimitUsage({ userId: user.id }, T0);
    assert.equal(usage.used, 5, "the batch's grants of one counter are stored as their sum");
    const rates = await store.listLimitUsage({ apiKeyId: key.id, userId: user.id }, T0);
    assert.deepEqual(rates.map((u) => `${u.rule.kind}:${u.used}`), ["rate:3", "quota:5"]);
    assert.deepEqual(await store.leaseLimits([]), []);
    // A batch of keys without limits only reads, and answers each with none.
    assert.deepEqual(
      await store.leaseLimits([{ apiKeyId: free.id, userId: stranger.id, now: T0, want: three }]),
      [[]],
    );
  });

  test("limits: concurrent lease calls of many keys grant exactly a shared limit", async ({ store }) => {
    const { user, key } = await seed(store);
    const other = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k2"), prefix: "k2", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    await put(store, {
      scope: "user",
      subjectId: user.id,
      kind: "quota",
      max: 100,
      period: "none",
    });
    const want = () => 3;
    const batch = [
      { apiKeyId: key.id, userId: user.id, now: T0, want },
      { apiKeyId: other.id, userId: user.id, now: T0, want },
    ];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.leaseLimits(i % 2 ? batch : [...batch].reverse())),
    );
    const granted = answers.flat(2).reduce((sum, s) => sum + s.granted, 0);
    assert.equal(granted, 100, "never more than the limit, whatever the batches hold");
    const [usage] = await store.listLimitUsage({ userId: user.id }, T0);
    assert.equal(usage.used, 100);
  });

  test("limits: one lease call and one return call of 14,000 counters (more than one PostgreSQL statement's parameters hold)", async ({ store }) => {
    const { user } = await seed(store);
    await put(store, { scope: "default", subjectId: null, kind: "rate", max: 100, period: "hour" });
    await put(store, {
      scope: "default",
      subjectId: null,
      kind: "quota",
      max: 1_000,
      period: "month",
    });
    // 7,000 keys × 2 limits: a clean stop of a thread with that many keys returns them at once.
    const owners = Array.from(
      { length: 7_000 },
      (_, i) => ({ apiKeyId: 100_000 + i, userId: user.id }),
    );
    const now = toLimitWindow("hour", T0).start + 1_000;
    const answers = await store.leaseLimits(owners.map((o) => ({ ...o, now, want: () => 5 })));
    const slices = answers.flat();
    assert.equal(slices.length, 14_000);
    assert.ok(slices.every((s) => s.granted === 5 && s.used === 5));
    const units = slices.map((s) => ({
      limitId: s.rule.id,
      subjectId: s.subjectId,
      windowStart: s.window.start,
      units: s.rule.kind === "rate" ? 5 : 2,
    }));
    await store.returnLimitUnits(units);
    for (const owner of [owners[0], owners[3_500], owners[6_999]]) {
      const usage = await store.listLimitUsage(owner, now);
      assert.deepEqual(usage.map((u) => `${u.rule.kind}:${u.used}`), ["rate:0", "quota:3"]);
    }
  });
}

/** Limits deleted alone or with their key or user, and their changes in the grant feed. */
export function registerLimitChangeTests(test: ContractTest): void {
  test("limits: deleted alone, or with their key or user; counters go with them", async (db) => {
    const { store } = db;
    const { user, key } = await seed(store);
    const owner = { apiKeyId: key.id, userId: user.id };
    const rule = await put(store, {
      scope: "key",
      subjectId: key.id,
      kind: "quota",
      max: 10,
      period: "none",
    });
    await lease(store, owner, T0, () => 4);
    const removed = await store.deleteLimit(rule.id, {
      now: T0,
      audit: (r) => r && entry("limit.removed", `api_key:${r.subjectId}`),
    });
    assert.equal(removed?.id, rule.id);
    assert.equal(await store.deleteLimit(rule.id, { now: T0, ...NO_AUDIT }), undefined);
    assert.deepEqual((await store.listAudit()).map((row) => row.action), ["limit.removed"]);
    const again = await put(store, {
      scope: "key",
      subjectId: key.id,
      kind: "quota",
      max: 10,
      period: "none",
    });
    assert.deepEqual(brief(await lease(store, owner, T0, () => 10)), ["key/quota/none:10/10"]);
    await put(store, { scope: "user", subjectId: user.id, kind: "rate", max: 1, period: "day" });
    await store.deleteUser(user.id, { now: T0, ...anonymizing(user.id), ...NO_AUDIT });
    assert.deepEqual(await store.listLimits(), []);
    assert.notEqual(again.id, undefined);
  });

  test("limits: a rotation moves the old key's own limits to the successor with what their windows used; both keys count against them", async ({ store }) => {
    const { user, key } = await seed(store);
    const old = { apiKeyId: key.id, userId: user.id };
    // The key's own rate and quota; the default's rate (which does not apply: the key has its
    // own); a user's rate, one counter for all the user's keys.
    await put(store, { scope: "key", subjectId: key.id, kind: "rate", max: 100, period: "minute" });
    const quota = await put(store, {
      scope: "key",
      subjectId: key.id,
      kind: "quota",
      max: 500,
      period: "none",
    });
    await put(store, { scope: "default", subjectId: null, kind: "rate", max: 5, period: "second" });
    await put(store, { scope: "user", subjectId: user.id, kind: "rate", max: 50, period: "hour" });
    await lease(store, old, T0, () => 7);
    const usage = async (owner: { apiKeyId: number; userId: number }, now: number) =>
      (await store.listLimitUsage(owner, now))
        .map((u) => `${u.rule.scope}/${u.rule.kind}/${u.rule.period}/${u.subjectId}:${u.used}`)
        .sort();
    const successor = await rotate(store, key.id, user.id, T0 + 1000);
    const next = { apiKeyId: successor.id, userId: user.id };
    // The same limits (ids and values), now the successor's; none left on the old key.
    assert.deepEqual(
      (await store.listLimits({ scope: "key", subjectId: successor.id })).map((
        l,
      ) => [l.id === quota.id, l.kind, l.period, l.max, l.createdAt, l.updatedAt]).sort(),
      [
        [false, "rate", "minute", 100, T0, T0 + 1000],
        [true, "quota", "none", 500, T0, T0 + 1000],
      ],
    );
    assert.deepEqual(await store.listLimits({ scope: "key", subjectId: key.id }), []);
    // What the windows used moved too: the successor starts where the old key was.
    const moved = [
      `key/quota/none/${successor.id}:7`,
      `key/rate/minute/${successor.id}:7`,
      `user/rate/hour/${user.id}:7`,
    ];
    assert.deepEqual(await usage(next, T0 + 1000), moved);
    // The old key, until it ends, reads and leases the successor's counters.
    assert.deepEqual(await usage(old, T0 + 1000), moved);
    const keyShare = (rule: LimitRule) => rule.scope === "key" ? 200 : 0;
    assert.deepEqual(
      brief(await lease(store, old, T0 + 2000, keyShare)).filter((l) => l.startsWith("key/"))
        .sort(),
      ["key/quota/none:200/207", "key/rate/minute:93/100"],
    );
    assert.deepEqual(
      brief(await lease(store, next, T0 + 2000, keyShare)).filter((l) => l.startsWith("key/"))
        .sort(),
      ["key/quota/none:200/407", "key/rate/minute:0/100"],
    );
    // Units leased under the old key before the rotation go back to the successor's counter.
    await store.returnLimitUnits([
      { limitId: quota.id, subjectId: key.id, windowStart: 0, units: 5 },
    ]);
    assert.deepEqual((await usage(next, T0 + 2000)).filter((l) => l.startsWith("key/quota")), [
      `key/quota/none/${successor.id}:402`,
    ]);
  });

  test("limits: a key rotated without limits of its own keeps the default's counter; nothing else moves", async ({ store }) => {
    const { user, key } = await seed(store);
    // Limits of other scopes and of another key: none of them is the rotated key's own.
    const { user: other, key: otherKey } = await seedUser(store, "c@d.org", "k3");
    await put(store, { scope: "default", subjectId: null, kind: "quota", max: 9, period: "none" });
    await put(store, { scope: "user", subjectId: user.id, kind: "rate", max: 8, period: "hour" });
    await put(store, { scope: "key", subjectId: otherKey.id, kind: "rate", max: 7, period: "day" });
    await lease(store, { apiKeyId: key.id, userId: user.id }, T0, () => 4);
    await lease(store, { apiKeyId: otherKey.id, userId: other.id }, T0, () => 2);
    const before = await store.listLimits();
    const successor = await rotate(store, key.id, user.id, T0);
    assert.deepEqual(await store.listLimits(), before);
    const usage = async (apiKeyId: number, userId: number) =>
      (await store.listLimitUsage({ apiKeyId, userId }, T0))
        .map((u) => `${u.rule.scope}/${u.rule.kind}/${u.rule.max}/${u.subjectId}:${u.used}`)
        .sort();
    // The successor counts on from the old key's use of the default's quota and its user's rate.
    assert.deepEqual(await usage(successor.id, user.id), [
      `default/quota/9/${successor.id}:4`,
      `user/rate/8/${user.id}:4`,
    ]);
    assert.deepEqual(await usage(key.id, user.id), await usage(successor.id, user.id));
    // The other key's counters stay its own.
    assert.deepEqual(await usage(otherKey.id, other.id), [
      `default/quota/9/${otherKey.id}:2`,
      `key/rate/7/${otherKey.id}:2`,
    ]);
  });

  test("limits: every key of a rotation chain counts against its last key's limits; a rotated key's cannot be set", async ({ store }) => {
    const { user, key: first } = await seed(store);
    await put(store, { scope: "key", subjectId: first.id, kind: "quota", max: 10, period: "none" });
    await lease(store, { apiKeyId: first.id, userId: user.id }, T0, () => 3);
    const second = await rotate(store, first.id, user.id, T0, "k2");
    await lease(store, { apiKeyId: second.id, userId: user.id }, T0, () => 3);
    const last = await rotate(store, second.id, user.id, T0, "k3");
    // The first key, still in its grace, leases from the last key's counter.
    assert.deepEqual(
      brief(await lease(store, { apiKeyId: first.id, userId: user.id }, T0, () => 3)),
      ["key/quota/none:3/9"],
    );
    assert.deepEqual(
      brief(await lease(store, { apiKeyId: last.id, userId: user.id }, T0, () => 3)),
      ["key/quota/none:1/10"],
    );
    for (const rotated of [first, second]) {
      await assert.rejects(
        put(store, { scope: "key", subjectId: rotated.id, kind: "rate", max: 1, period: "day" }),
        StoreConflict,
      );
    }
    assert.deepEqual((await store.listLimits()).map((l) => [l.subjectId, l.max]), [[last.id, 10]]);
  });

  test("limits: a lease of a key more than MAX_CHAIN_WALK rotations behind (made by hand) fails; a report does not", async ({ store }) => {
    const { user, key: first } = await seed(store);
    await put(store, { scope: "key", subjectId: first.id, kind: "quota", max: 10, period: "none" });
    let last = first;
    for (let i = 0; i <= MAX_CHAIN_WALK; i++) {
      last = await rotate(store, last.id, user.id, T0, `chain-${i}`);
    }
    // The last key and one MAX_CHAIN_WALK rotations behind it lease; the first, one more
    // behind, is refused rather than counted against limits that are not its chain's.
    const second = (await store.findApiKeyById(first.id))!.replacedBy!;
    for (const id of [last.id, second]) {
      assert.deepEqual(brief(await lease(store, { apiKeyId: id, userId: user.id }, T0, () => 1)), [
        "key/quota/none:1/" + (id === last.id ? 1 : 2),
      ]);
    }
    await assert.rejects(lease(store, { apiKeyId: first.id, userId: user.id }, T0), TooLongChain);
    await store.listLimitUsage({ apiKeyId: first.id, userId: user.id }, T0);
    assert.deepEqual(
      (await store.listLimitUsage({ apiKeyId: last.id, userId: user.id }, T0)).map((u) => u.used),
      [2],
    );
  });

  test("limits: leases racing rotations of their chain: every unit granted is counted in the last key's counter", async ({ store }) => {
    const { user, key: first } = await seed(store);
    await put(store, {
      scope: "key",
      subjectId: first.id,
      kind: "quota",
      max: 5000,
      period: "none",
    });
    await put(store, { scope: "default", subjectId: null, kind: "rate", max: 1000, period: "day" });
    const old = { apiKeyId: first.id, userId: user.id };
    await lease(store, old, T0, () => 1);
    let granted = 1;
    // Five rounds, each 40 leases of the first key racing a rotation of the chain's last key:
    // a lease that read the chain before the rotation committed must not count elsewhere.
    let last = first;
    for (let round = 0; round < 5; round++) {
      const leases = Array.from({ length: 40 }, async () => {
        for (const slice of await lease(store, old, T0, (rule) => rule.kind === "quota" ? 10 : 0)) {
          granted += slice.granted;
        }
      });
      [last] = await Promise.all([rotate(store, last.id, user.id, T0, `race-${round}`), ...leases]);
    }
    const [used] = (await store.listLimitUsage({ apiKeyId: last.id, userId: user.id }, T0))
      .filter((u) => u.rule.kind === "quota").map((u) => u.used);
    assert.equal(granted, 2001);
    assert.equal(used, granted);
  });

  test("limits: a deleted user's keys leave no counter of the default behind", async ({ store }) => {
    const { user, key } = await seed(store);
    const rule = await put(store, {
      scope: "default",
      subjectId: null,
      kind: "quota",
      max: 10,
      period: "none",
    });
    await lease(store, { apiKeyId: key.id, userId: user.id }, T0, () => 4);
    const { user: other, key: otherKey } = await seedUser(store, "c@d.org", "k2");
    await lease(store, { apiKeyId: otherKey.id, userId: other.id }, T0, () => 3);
    // What a key with the deleted key's id would find (SQLite reuses the largest id).
    const usedBy = async (apiKeyId: number, userId: number) =>
      (await store.listLimitUsage({ apiKeyId, userId }, T0)).map((u) => u.used);
    assert.deepEqual(await usedBy(key.id, user.id), [4]);
    await store.deleteUser(user.id, { now: T0, ...anonymizing(user.id), ...NO_AUDIT });
    assert.deepEqual(await usedBy(key.id, user.id), [0]);
    // The other user's counter stays; the default stays.
    const [left] = await store.listLimitUsage({ apiKeyId: otherKey.id, userId: other.id }, T0);
    assert.deepEqual([left.rule.id, left.used], [rule.id, 3]);
    assert.deepEqual((await store.listLimits()).map((l) => l.id), [rule.id]);
  });

  test("limits: a change is in the grant change feed (key, user, or all for the default)", async ({ store }) => {
    const { user, key } = await seed(store);
    const changes = async (write: () => Promise<unknown>) => {
      const before = store.readGrantEpoch()!;
      await write();
      assert.notEqual(store.readGrantEpoch(), before);
      return store.readGrantChanges(before);
    };
    assert.deepEqual(
      await changes(() =>
        put(store, { scope: "key", subjectId: key.id, kind: "rate", max: 1, period: "second" })
      ),
      [{ kind: "key", id: key.id }],
    );
    const rule = await put(store, {
      scope: "user",
      subjectId: user.id,
      kind: "rate",
      max: 1,
      period: "second",
    });
    assert.deepEqual(
      await changes(() => store.deleteLimit(rule.id, { now: T0, ...NO_AUDIT })),
      [{ kind: "user", id: user.id }],
    );
    assert.deepEqual(
      await changes(() =>
        put(store, { scope: "default", subjectId: null, kind: "quota", max: 1, period: "day" })
      ),
      [{ kind: "all" }],
    );
    // Leases and returns are bookkeeping: they change no grant.
    const before = store.readGrantEpoch();
    await lease(store, { apiKeyId: key.id, userId: user.id }, T0);
    assert.equal(store.readGrantEpoch(), before);
  });
}
