import assert from "node:assert/strict";
import { generateToken } from "../../src/auth/credentials.ts";
import { createGate } from "../../src/auth/gate.ts";
import { createMetrics } from "../../src/platform/metrics.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import { addApiKey, addTestToken, addTestUser, openTestStore } from "../_helpers/store.ts";
import { setUpResourceServer } from "../_helpers/resource_server.ts";

const SECURE = "https://keygate.test/api/secure/userservice/tokens/current";

Deno.test("createGate() reports its grant cache's hits, misses, evictions and entries in /metrics", async () => {
  await using opened = await openTestStore();
  const { store } = opened;
  const clock = createFakeClock();
  const now = clock.now();
  const userId = await addTestUser(store, "cache@example.org", { now });
  const apiKey = await addApiKey(store, userId, now);
  const [{ id: apiKeyId }] = await store.listApiKeys(userId);
  const tokens = [generateToken(), generateToken(), generateToken()];
  for (const secret of tokens) {
    await addTestToken(store, { userId, apiKeyId, issuedAt: now, expiresAt: now + 60_000, secret });
  }
  const metrics = createMetrics();
  const gate = createGate({ store, clock, metrics, grantCacheSize: 2 });
  const ask = (token: string) =>
    gate.authenticateToken(
      new Request(SECURE, { headers: { "X-Api-Key": apiKey, Authorization: `Bearer ${token}` } }),
      { query: new URLSearchParams(), clientAddress: "127.0.0.1" },
    );
  // Three tokens through a cache of two: three misses, one eviction; then one hit.
  for (const token of tokens) assert.equal((await ask(token)).userId, userId);
  assert.equal((await ask(tokens[2])).userId, userId);
  const text = await metrics.render();
  const value = (line: string) => {
    const found = text.split("\n").find((l) => l.startsWith(line + " "));
    assert.ok(found !== undefined, `${line} missing in:\n${text}`);
    return Number(found.slice(line.length + 1));
  };
  assert.equal(value('keygate_cache_lookups_total{cache="grant",result="miss"}'), 3);
  assert.equal(value('keygate_cache_lookups_total{cache="grant",result="hit"}'), 1);
  assert.equal(value('keygate_cache_evictions_total{cache="grant"}'), 1);
  assert.equal(value('keygate_cache_entries{cache="grant"}'), 2);
  assert.equal(value('keygate_cache_hit_ratio{cache="grant"}'), 0.25);
  // No label but the cache's name and hit or miss: never a key, token or user.
  for (const line of text.split("\n").filter((l) => l.startsWith("keygate_cache_"))) {
    assert.match(line, /^keygate_cache_\w+\{cache="(grant|key_holder)"(,result="(hit|miss)")?\} /);
  }
  // A second scrape reads the same totals (they are not added twice).
  const again = await metrics.render();
  assert.ok(again.includes('keygate_cache_lookups_total{cache="grant",result="miss"} 3'));
});

Deno.test("the introspection endpoint's token-status cache reports its hits and misses in /metrics", async () => {
  const metrics = createMetrics();
  const { app, token, resourceKey } = await setUpResourceServer(null, { metrics });
  using _ = app;
  for (let i = 0; i < 3; i++) {
    const response = await app.handler(
      new Request("https://keygate.test/api/userservice/tokens/introspect", {
        method: "POST",
        body: `token=${token}`,
        headers: {
          "x-api-key": resourceKey,
          "content-type": "application/x-www-form-urlencoded",
          accept: "application/json",
        },
      }),
    );
    assert.equal(response.status, 200);
    assert.equal((await response.json()).active, true);
  }
  const text = await metrics.render();
  assert.ok(
    text.includes('keygate_cache_lookups_total{cache="token_status",result="miss"} 1'),
    text,
  );
  assert.ok(
    text.includes('keygate_cache_lookups_total{cache="token_status",result="hit"} 2'),
    text,
  );
  assert.ok(text.includes('keygate_cache_entries{cache="token_status"} 1'), text);
});
