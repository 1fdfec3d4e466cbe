/**
 * Limits on the public API, through the real handler on the backend under test with the fake
 * clock: 429 in the caller's format with distinct codes, Retry-After and the RateLimit headers,
 * the remaining budget on successful answers (and none with the headers off), the user's and
 * the default's limits, forward-auth and introspection, and the leases of several keys in one
 * store call (the store-unreachable choice is in limiter_outage_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createLimiter } from "../../src/auth/limiter.ts";
import { createMetrics } from "../../src/platform/metrics.ts";
import { setLimit } from "../../src/auth/limits.ts";
import type { Store } from "../../src/store/store.ts";
import { assertError, BASE, issueToken, secureGet } from "../_helpers/requests.ts";
import { createTestApp } from "../_helpers/test_app.ts";
import { limitChangeDeps, setUpLimitsApp } from "./_limits.ts";
import { setUpResourceServer } from "../_helpers/resource_server.ts";

const CURRENT = "/api/secure/userservice/tokens/current";

Deno.test("[e2e] a key's rate limit: 200 with RateLimit headers, then 429 rate_limited with Retry-After, then 200 in the next window", async () => {
  const { app, apiKey, token, keyId } = await setUpLimitsApp();
  using _ = app;
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "rate",
    max: 3,
    period: "minute",
  });
  app.clock.advance(60_000 - (app.clock.now() % 60_000) + 10_000); // 50 s before the window ends
  const first = await secureGet(app.handler, CURRENT, apiKey, token);
  assert.equal(first.status, 200);
  assert.equal(first.headers.get("ratelimit-policy"), '"key-rate-minute";q=3;w=60');
  assert.equal(first.headers.get("ratelimit"), '"key-rate-minute";r=2;t=50');
  await first.body?.cancel();
  for (const remaining of [1, 0]) {
    const ok = await secureGet(app.handler, CURRENT, apiKey, token);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("ratelimit"), `"key-rate-minute";r=${remaining};t=50`);
    await ok.body?.cancel();
  }
  const refused = await secureGet(app.handler, CURRENT + ".json", apiKey, token);
  const message = await assertError(refused, 429, "rate_limited", "json");
  assert.equal(message, "Rate limit exceeded: retry after the time given");
  assert.equal(refused.headers.get("retry-after"), "50");
  assert.equal(refused.headers.get("ratelimit"), '"key-rate-minute";r=0;t=50');
  const xml = await secureGet(app.handler, CURRENT, apiKey, token);
  await assertError(xml, 429, "rate_limited");
  app.clock.advance(50_000);
  const next = await secureGet(app.handler, CURRENT, apiKey, token);
  assert.equal(next.status, 200);
  assert.equal(next.headers.get("ratelimit"), '"key-rate-minute";r=2;t=60');
  await next.body?.cancel();
  // Stored state: the window's counter says what was leased (3 in the first window, 1 now).
  const [usage] = await app.store.listLimitUsage({ apiKeyId: keyId, userId: 0 }, app.clock.now());
  assert.ok(usage.used >= 1 && usage.used <= 3, `used ${usage.used}`);
});

Deno.test("[e2e] a user's quota is shared by its keys; 429 quota_exceeded without Retry-After when it never refills", async () => {
  const { app, userId, apiKey, token } = await setUpLimitsApp();
  using _ = app;
  const second = await app.createKey(userId);
  const secondToken = await issueToken(app.handler, "alice@example.org", "pw", second);
  await setLimit(limitChangeDeps(app), {
    scope: "user",
    user: { id: userId, email: "alice@example.org" },
  }, {
    kind: "quota",
    max: 3,
    period: "none",
  });
  const statuses = [];
  for (const [key, tok] of [[apiKey, token], [second, secondToken], [apiKey, token]]) {
    const response = await secureGet(app.handler, CURRENT, key, tok);
    statuses.push(response.status);
    assert.equal(response.headers.get("ratelimit-policy"), '"user-quota-none";q=3');
    await response.body?.cancel();
  }
  assert.deepEqual(statuses, [200, 200, 200]);
  const refused = await secureGet(app.handler, CURRENT, second, secondToken);
  await assertError(refused, 429, "quota_exceeded");
  assert.equal(refused.headers.get("retry-after"), null);
  assert.equal(refused.headers.get("ratelimit"), '"user-quota-none";r=0');
  const audit = await app.store.listAudit();
  assert.deepEqual(audit.filter((row) => row.action === "limit.set").map((row) => row.detail), [
    { limit_id: (await app.store.listLimits())[0].id, kind: "quota", max: 3, period: "none" },
  ]);
});

Deno.test("[e2e] RateLimit-Policy follows a changed limit and a month's length", async () => {
  const app = await createTestApp();
  using _ = app;
  app.clock.set(Date.parse("2026-04-30T20:00:00Z")); // the last day of a month of 30 days
  const userId = await app.addUser("alice@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  const keyId = (await app.store.listApiKeys(userId))[0].id;
  const key = { scope: "key" as const, key: { id: keyId } };
  await setLimit(limitChangeDeps(app), key, { kind: "quota", max: 100, period: "month" });
  async function policyNow(): Promise<string | null> {
    const response = await secureGet(app.handler, CURRENT, apiKey, token);
    assert.equal(response.status, 200);
    await response.body?.cancel();
    return response.headers.get("ratelimit-policy");
  }
  assert.equal(await policyNow(), '"key-quota-month";q=100;w=2592000');
  assert.equal(await policyNow(), '"key-quota-month";q=100;w=2592000');
  await setLimit(limitChangeDeps(app), key, { kind: "quota", max: 50, period: "month" });
  assert.equal(await policyNow(), '"key-quota-month";q=50;w=2592000');
  app.clock.advance(6 * 3_600_000); // 02:00 on May 1st: a month of 31 days
  assert.equal(await policyNow(), '"key-quota-month";q=50;w=2678400');
});

Deno.test("[e2e] the default applies to keys without their own limit of that kind; the headers can be switched off", async () => {
  const { app, apiKey, token, keyId } = await setUpLimitsApp({ limitHeaders: false });
  using _ = app;
  await setLimit(limitChangeDeps(app), { scope: "default" }, {
    kind: "rate",
    max: 1,
    period: "hour",
  });
  const ok = await secureGet(app.handler, CURRENT, apiKey, token);
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get("ratelimit"), null);
  assert.equal(ok.headers.get("ratelimit-policy"), null);
  await ok.body?.cancel();
  const refused = await secureGet(app.handler, CURRENT, apiKey, token);
  await assertError(refused, 429, "rate_limited");
  assert.equal(refused.headers.get("ratelimit"), null);
  assert.ok(Number(refused.headers.get("retry-after")) > 0);
  // The key's own rate replaces the default's: the change is learned at once.
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "rate",
    max: 5,
    period: "hour",
  });
  const own = await secureGet(app.handler, CURRENT, apiKey, token);
  assert.equal(own.status, 200);
  await own.body?.cancel();
});

Deno.test("[e2e] forward-auth and introspection count against the caller's limits", async () => {
  const { app, apiKey, token, resourceKey, resourceKeyId, keyId } = await setUpResourceServer();
  using _ = app;
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "quota",
    max: 1,
    period: "day",
  });
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: resourceKeyId } }, {
    kind: "rate",
    max: 1,
    period: "second",
  });
  const verify = () =>
    app.handler(
      new Request(`${BASE}/api/userservice/verify`, {
        headers: { "x-original-uri": `/api/secure/x?api_key=${apiKey}&api_token=${token}` },
      }),
    );
  const verified = await verify();
  assert.equal(verified.status, 200);
  assert.match(verified.headers.get("ratelimit")!, /^"key-quota-day";r=0;t=\d+$/);
  assert.equal(verified.headers.get("x-keygate-key-id"), String(keyId));
  const refused = await verify();
  await assertError(refused, 429, "quota_exceeded");
  assert.equal(refused.headers.get("x-keygate-key-id"), null);
  assert.ok(Number(refused.headers.get("retry-after")) > 0);

  const introspect = () =>
    app.handler(
      new Request(`${BASE}/api/userservice/tokens/introspect`, {
        method: "POST",
        body: `token=${token}`,
        headers: {
          "x-api-key": resourceKey,
          "content-type": "application/x-www-form-urlencoded",
          accept: "application/json",
        },
      }),
    );
  const first = await introspect();
  assert.equal(first.status, 200);
  assert.equal((await first.json()).active, true);
  const second = await introspect();
  await assertError(second, 429, "rate_limited", "json");
  assert.equal(second.headers.get("retry-after"), "1");
});

Deno.test("limiter: the keys that need units together are leased in one store call, those asking meanwhile in the next", async () => {
  const { app, userId } = await setUpLimitsApp();
  using _ = app;
  await setLimit(limitChangeDeps(app), { scope: "default" }, {
    kind: "rate",
    max: 100,
    period: "minute",
  });
  await setLimit(limitChangeDeps(app), {
    scope: "user",
    user: { id: userId, email: "alice@example.org" },
  }, {
    kind: "quota",
    max: 1000,
    period: "none",
  });
  for (let i = 0; i < 8; i++) await app.createKey(userId);
  const owners = (await app.store.listApiKeys(userId)).map((key) => ({ apiKeyId: key.id, userId }));
  assert.equal(owners.length, 9);
  // The store holds the first call open until released, so that the keys asking meanwhile
  // are known to ask while it is under way.
  const calls: number[] = [];
  let entered!: () => void;
  const inFirst = new Promise<void>((resolve) => entered = resolve);
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  const store: Store = Object.assign(Object.create(app.store), {
    async leaseLimits(requests: Parameters<Store["leaseLimits"]>[0]) {
      calls.push(requests.length);
      if (calls.length === 1) {
        entered();
        await held;
      }
      return await app.store.leaseLimits(requests);
    },
  });
  const leased: number[] = [];
  const limiter = createLimiter({
    store,
    clock: app.clock,
    leaseAhead: true,
    metrics: {
      limitedRequest: () => {},
      limitStoreUnavailable: () => {},
      limitLeases: (keys) => leased.push(keys),
    },
  });
  // Five keys in one turn of the event loop: one call.
  const first = owners.slice(0, 5).map((owner) => limiter.admit(owner));
  await inFirst;
  const second = owners.slice(5).map((owner) => limiter.admit(owner));
  release();
  const statuses = await Promise.all([...first, ...second]);
  assert.deepEqual(calls, [5, 4]);
  assert.deepEqual(leased, [5, 4]);
  assert.equal(limiter.readLeaseCalls(), 2);
  for (const answer of statuses) {
    assert.deepEqual(answer.policies.map((p) => p.name), [
      "default-rate-minute",
      "user-quota-none",
    ]);
  }
  // The keys share their user's quota: the batch's grants of it are in its one counter.
  const quota = (await app.store.listLimitUsage({ userId }, app.clock.now()))[0];
  assert.ok(quota.used >= 9 && quota.used <= 1000, `quota used ${quota.used}`);
  // Units in hand admit without a store call.
  for (const owner of owners) await limiter.admit(owner);
  assert.deepEqual(calls, [5, 4]);
  await limiter.stop();
  const [after] = await app.store.listLimitUsage({ userId }, app.clock.now());
  assert.equal(after.used, 18, "a clean stop gives back every unit not spent");
});

Deno.test("[e2e] --upstream: a limited key's requests reach the upstream with RateLimit headers, then 429 without reaching it", async () => {
  let reached = 0;
  const upstream = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    reached++;
    return new Response("from upstream", { headers: { "content-type": "text/plain" } });
  });
  try {
    const { app, apiKey, token, keyId } = await setUpLimitsApp({
      upstream: { url: new URL(`http://127.0.0.1:${upstream.addr.port}`), timeoutMs: 5000 },
    });
    using _ = app;
    await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
      kind: "quota",
      max: 2,
      period: "day",
    });
    const secure = `${BASE}/api/secure/orders?api_key=${apiKey}&api_token=${token}`;
    const keyOnly = `${BASE}/catalog?api_key=${apiKey}`;
    for (const [url, remaining] of [[secure, 1], [keyOnly, 0]] as const) {
      const response = await app.handler(new Request(url));
      assert.equal(response.status, 200);
      assert.equal(await response.text(), "from upstream");
      assert.match(
        response.headers.get("ratelimit")!,
        new RegExp(`^"key-quota-day";r=${remaining};t=\\d+$`),
      );
      assert.match(response.headers.get("ratelimit-policy")!, /^"key-quota-day";q=2;w=86400$/);
    }
    const refused = await app.handler(
      new Request(secure, { headers: { accept: "application/json" } }),
    );
    await assertError(refused, 429, "quota_exceeded", "json");
    assert.equal(reached, 2, "a refused request never reaches the upstream");
  } finally {
    await upstream.shutdown();
  }
});

Deno.test("[e2e] /metrics counts limited requests by kind, without a per-key label", async () => {
  const metrics = createMetrics();
  const { app, apiKey, token, keyId } = await setUpLimitsApp({ metrics });
  using _ = app;
  await setLimit(limitChangeDeps(app), { scope: "key", key: { id: keyId } }, {
    kind: "rate",
    max: 1,
    period: "hour",
  });
  const statuses = [];
  for (let i = 0; i < 3; i++) {
    const response = await secureGet(app.handler, CURRENT, apiKey, token);
    statuses.push(response.status);
    await response.body?.cancel();
  }
  assert.deepEqual(statuses, [200, 429, 429]);
  const text = await metrics.render();
  assert.match(text, /^keygate_limited_requests_total\{kind="rate"\} 2$/m);
  assert.match(text, /^keygate_limited_requests_total\{kind="quota"\} 0$/m);
  assert.match(text, /^keygate_limit_store_unavailable_total\{kind="rate"\} 0$/m);
  assert.doesNotMatch(text, new RegExp(`keygate_limit\\w*\\{[^}]*${keyId}`));
});
