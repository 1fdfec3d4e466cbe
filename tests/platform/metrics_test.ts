import assert from "node:assert/strict";
import { createMetrics, type Metrics } from "../../src/platform/metrics.ts";
import { createMetricsHandler } from "../../src/http/metrics_handler.ts";
import {
  assertError,
  BASE,
  issueToken,
  jsonAuthRequest,
  postToken,
  secureGet,
} from "../_helpers/requests.ts";
import { createTestApp } from "../_helpers/test_app.ts";
import { readMailStates } from "../../src/server/start_mailer.ts";
import type { Store } from "../../src/store/store.ts";

const CURRENT = "/api/secure/userservice/tokens/current";

/** The value of one sample (`name{labels} value`) in Prometheus text, or undefined. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith(series + " ")) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

async function setup() {
  let countLiveTokens = () => Promise.resolve(0);
  const metrics = createMetrics({ countLiveTokens: () => countLiveTokens() });
  const app = await createTestApp({ metrics });
  countLiveTokens = () => app.store.countLiveTokens(app.clock.now());
  const userId = await app.addUser("m@example.org", "pw");
  const apiKey = await app.createKey(userId);
  return { app, metrics, apiKey };
}

async function scrape(metrics: Metrics): Promise<string> {
  const response = await createMetricsHandler(metrics)(new Request("http://127.0.0.1/metrics"));
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  return await response.text();
}

Deno.test("[e2e] metrics count issued tokens, login failures and secure outcomes", async () => {
  const { app, metrics, apiKey } = await setup();
  using _ = app;
  let text = await scrape(metrics);
  assert.equal(sample(text, "keygate_tokens_issued_total"), 0);
  assert.equal(sample(text, "keygate_live_tokens"), 0);

  const token = await issueToken(app.handler, "m@example.org", "pw", apiKey);
  await issueToken(app.handler, "m@example.org", "pw", apiKey);
  const wrong = await postToken(app.handler, jsonAuthRequest("m@example.org", "nope", apiKey));
  await assertError(wrong, 401, "invalid_credentials");
  const malformed = await postToken(app.handler, "{");
  await assertError(malformed, 400, "invalid_request");
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, token)).status, 200);
  await assertError(
    await secureGet(app.handler, CURRENT, apiKey, "a".repeat(40)),
    401,
    "invalid_token",
  );

  text = await scrape(metrics);
  assert.equal(sample(text, "keygate_tokens_issued_total"), 2);
  assert.equal(sample(text, "keygate_live_tokens"), 2);
  assert.equal(sample(text, 'keygate_login_failures_total{reason="invalid_credentials"}'), 1);
  assert.equal(sample(text, 'keygate_login_failures_total{reason="invalid_request"}'), 1);
  assert.equal(sample(text, 'keygate_secure_requests_total{outcome="allowed",reason="ok"}'), 1);
  assert.equal(
    sample(text, 'keygate_secure_requests_total{outcome="denied",reason="invalid_token"}'),
    1,
  );

  app.clock.advance(36000 * 1000);
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "token_expired");
  text = await scrape(metrics);
  assert.equal(sample(text, "keygate_live_tokens"), 0);
  assert.equal(
    sample(text, 'keygate_secure_requests_total{outcome="denied",reason="token_expired"}'),
    1,
  );
});

Deno.test("[e2e] the latency histogram is labelled by route pattern, never by raw path", async () => {
  const { app, metrics, apiKey } = await setup();
  using _ = app;
  const token = await issueToken(app.handler, "m@example.org", "pw", apiKey);
  await (await secureGet(app.handler, CURRENT + ".json", apiKey, token)).body?.cancel();
  await (await secureGet(app.handler, "/api/secure/users/12345", apiKey, token)).body?.cancel();
  await (await app.handler(new Request(`${BASE}/secret-path-canary`))).body?.cancel();
  await (await app.handler(new Request(`${BASE}/healthz`, { method: "BREW" }))).body?.cancel();
  const text = await scrape(metrics);
  const count = (labels: string) =>
    sample(text, `keygate_http_request_duration_seconds_count{${labels}}`);
  assert.equal(count(`route="${CURRENT}",method="GET",status="200"`), 1);
  assert.equal(count('route="/api/userservice/tokens",method="POST",status="200"'), 1);
  assert.equal(count('route="secure_other",method="GET",status="404"'), 1);
  assert.equal(count('route="other",method="GET",status="401"'), 1);
  assert.equal(count('route="/healthz",method="other",status="405"'), 1);
  assert.ok(!text.includes("canary"), "a raw path became a label");
  assert.ok(!text.includes("12345"), "a raw path became a label");
  assert.ok(!text.includes(token) && !text.includes(apiKey));
});

Deno.test("[e2e] metrics count database errors", async () => {
  const { app, metrics } = await setup();
  using _ = app;
  await app.store.closeStore();
  const response = await app.handler(new Request(`${BASE}/readyz`));
  assert.equal(response.status, 503);
  await response.body?.cancel();
  const failed = await postToken(
    app.handler,
    jsonAuthRequest("m@example.org", "pw", crypto.randomUUID()),
  );
  assert.equal(failed.status, 500);
  await failed.body?.cancel();
  const text = await scrape(metrics);
  assert.equal(sample(text, 'keygate_database_errors_total{source="readiness"}'), 1);
  assert.equal(sample(text, 'keygate_database_errors_total{source="request"}'), 1);
  // The live-token gauge cannot read a closed database: NaN, and one more error.
  assert.equal(sample(text, "keygate_live_tokens"), Number.NaN);
  assert.equal(sample(text, 'keygate_database_errors_total{source="live_tokens"}'), 1);
});

Deno.test("createMetrics() counts throttled requests and purged rows per registry", async () => {
  const one = createMetrics();
  const two = createMetrics();
  one.throttled("/api/userservice/tokens");
  one.throttled("/api/userservice/tokens");
  one.tokensPurged(3);
  const text = await one.render();
  assert.equal(
    sample(text, 'keygate_throttled_requests_total{route="/api/userservice/tokens"}'),
    2,
  );
  assert.equal(sample(text, "keygate_tokens_purged_total"), 3);
  assert.equal(sample(await two.render(), "keygate_tokens_purged_total"), 0, "no shared state");
});

Deno.test("createMetricsHandler() serves only GET /metrics", async () => {
  const handler = createMetricsHandler(createMetrics());
  const other = await handler(new Request("http://127.0.0.1/"));
  assert.equal(other.status, 404);
  await other.body?.cancel();
  const post = await handler(new Request("http://127.0.0.1/metrics", { method: "POST" }));
  assert.equal(post.status, 405);
  assert.equal(post.headers.get("allow"), "GET, HEAD");
  await post.body?.cancel();
});

Deno.test("[e2e] the API port does not serve /metrics", async () => {
  const { app } = await setup();
  using _ = app;
  await assertError(await app.handler(new Request(`${BASE}/metrics`)), 401, "invalid_api_key");
});

Deno.test("createMetrics() counts grant invalidations by scope, the four scopes from the start", async () => {
  let totals: Record<"token" | "key" | "user" | "all", number> | undefined;
  const metrics = createMetrics({ readGrantInvalidations: () => totals });
  const before = await metrics.render();
  for (const scope of ["token", "key", "user", "all"]) {
    assert.equal(sample(before, `keygate_grant_invalidations_total{scope="${scope}"}`), 0);
  }
  totals = { token: 3, key: 1, user: 0, all: 1 };
  const text = await metrics.render();
  assert.equal(sample(text, 'keygate_grant_invalidations_total{scope="token"}'), 3);
  assert.equal(sample(text, 'keygate_grant_invalidations_total{scope="key"}'), 1);
  assert.equal(sample(text, 'keygate_grant_invalidations_total{scope="all"}'), 1);
  totals = { token: 5, key: 1, user: 2, all: 1 };
  const later = await metrics.render();
  assert.equal(sample(later, 'keygate_grant_invalidations_total{scope="token"}'), 5);
  assert.equal(sample(later, 'keygate_grant_invalidations_total{scope="user"}'), 2);
  assert.doesNotMatch(later, /keygate_grant_invalidations_total\{[^}]*(id|subject)=/);
});

Deno.test("[e2e] /metrics counts a revocation's invalidation by its scope", async () => {
  await using app = await createTestApp();
  const metrics = createMetrics({
    readGrantInvalidations: () => app.store.readGrantInvalidations(),
  });
  const userId = await app.addUser("inv@example.org", "pw");
  const series = 'keygate_grant_invalidations_total{scope="user"}';
  app.store.readGrantEpoch();
  const before = sample(await metrics.render(), series)!;
  await app.store.revokeTokensOfUser(userId, { now: Date.now(), audit: undefined });
  app.store.readGrantEpoch(); // the next request's check
  assert.equal(sample(await metrics.render(), series)! - before, 1);
});

Deno.test("[e2e] /metrics shows the portal's outbox by state, read from the store at scrape time", async () => {
  let store: Pick<Store, "countMail"> | undefined;
  const metrics = createMetrics({ countMail: () => readMailStates(store!) });
  const app = await createTestApp({ metrics });
  using _ = app;
  store = app.store;
  let text = await scrape(metrics);
  for (const state of ["queued", "sent", "given_up"]) {
    assert.equal(sample(text, `keygate_mail_outbox_messages{state="${state}"}`), 0, state);
  }
  const mail = { recipient: "dev@example.org", subject: "Verify", text: "code" };
  for (let i = 0; i < 4; i++) {
    await app.store.insertMail(mail, { now: app.clock.now(), audit: undefined });
  }
  const [a, b, c] = await app.store.claimMail(app.clock.now(), { limit: 3, leaseMs: 1000 });
  await app.store.markMailSent(a.id, app.clock.now());
  await app.store.markMailSent(b.id, app.clock.now());
  await app.store.markMailFailed(c.id, { now: app.clock.now(), nextAttemptAt: null, error: "no" });
  text = await scrape(metrics);
  assert.equal(sample(text, 'keygate_mail_outbox_messages{state="queued"}'), 1);
  assert.equal(sample(text, 'keygate_mail_outbox_messages{state="sent"}'), 2);
  assert.equal(sample(text, 'keygate_mail_outbox_messages{state="given_up"}'), 1);
  assert.doesNotMatch(text, /example\.org/, "no per-address label");
  // Without the portal (no countMail), no such series.
  assert.doesNotMatch(await scrape(createMetrics()), /keygate_mail_outbox_messages/);
  // A store that cannot answer: NaN, and a database error counted.
  store = { countMail: () => Promise.reject(new Error("closed")) };
  text = await scrape(metrics);
  assert.equal(sample(text, 'keygate_mail_outbox_messages{state="queued"}'), Number.NaN);
  assert.equal(sample(text, 'keygate_database_errors_total{source="mail_outbox"}'), 1);
});
