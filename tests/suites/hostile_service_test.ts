/**
 * The hostile-input suite of issue 4 (items 6-12 here, 1-5 in hostile_test.ts): one case
 * per item, each through the real handler over a real store, asserting the status, the error body in
 * the caller's format, and that stored data did not change (row counts, the
 * existing token still valid). Items 4, 7 and 9 have deeper suites in
 * throttle_test.ts, faults_test.ts and tls_test.ts.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { createHandler } from "../../src/http/app.ts";
import { generateApiKey, hashSecret } from "../../src/auth/credentials.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { MAX_LIVE_TOKENS } from "../../src/auth/login.ts";
import { createCapturingLogger } from "../_helpers/capturing_logger.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import {
  assertError,
  BASE,
  issueToken,
  jsonAuthRequest,
  secureGet,
  xmlAuthRequest,
} from "../_helpers/requests.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import {
  CURRENT,
  EMAIL,
  fingerprint,
  JSON_IO,
  PASSWORD,
  realHasher,
  setup,
  XML,
} from "../_helpers/hostile_app.ts";

Deno.test("[hostile 6] no enumeration: every credential failure looks the same, as do throttled right and wrong passwords", async () => {
  const t = await setup();
  using _ = t;
  const bobId = await t.app.addUser("bob@example.org", "bob password");
  const bobKey = await t.app.createKey(bobId);
  const carolId = await t.app.addUser("carol@example.org", "carol password");
  const carolKey = await t.app.createKey(carolId);
  await t.app.store.updateUserDisabled(carolId, {
    disabled: true,
    now: t.app.clock.now(),
    audit: undefined,
  });
  const revokedKey = await t.app.createKey(t.userId);
  await t.app.store.revokeApiKey((await t.app.store.listApiKeys(t.userId)).at(-1)!.id, {
    now: t.app.clock.now(),
    audit: undefined,
  });
  const disabledKey = await t.app.createKey(t.userId);
  await t.app.store.updateApiKeyDisabled((await t.app.store.listApiKeys(t.userId)).at(-1)!.id, {
    disabled: true,
    now: 0,
    audit: undefined,
  });
  const expiredKey = generateApiKey();
  await t.app.store.insertApiKey({
    userId: t.userId,
    keyHash: hashSecret(expiredKey),
    prefix: "x",
    label: "",
    expiresAt: t.app.clock.now() - 1,
  }, { now: t.app.clock.now() - 1000, audit: undefined });
  await t.mark();

  const cases = {
    "wrong password": jsonAuthRequest(EMAIL, "wrong", t.apiKey),
    "unknown e-mail": jsonAuthRequest("nobody@example.org", PASSWORD, t.apiKey),
    "disabled user": jsonAuthRequest("carol@example.org", "carol password", carolKey),
    "revoked key": jsonAuthRequest(EMAIL, PASSWORD, revokedKey),
    "another user's key": jsonAuthRequest(EMAIL, PASSWORD, bobKey),
    "unknown key": jsonAuthRequest(EMAIL, PASSWORD, generateApiKey()),
    "disabled key": jsonAuthRequest(EMAIL, PASSWORD, disabledKey),
    "expired key": jsonAuthRequest(EMAIL, PASSWORD, expiredKey),
  };
  for (const headers of [JSON_IO, { "content-type": "application/json" }]) {
    const seen = [];
    for (const [name, body] of Object.entries(cases)) {
      seen.push([name, await fingerprint(await t.send(body, headers))] as const);
    }
    for (const [name, print] of seen) assert.deepEqual(print, seen[0][1], name);
    assert.equal(seen[0][1].status, 401);
  }
  await t.assertIntact();

  // Throttled: a correct and a wrong password get the same 429.
  const throttled = await setup({ throttleRules: undefined });
  using __ = throttled;
  for (let i = 0; i < 5; i++) {
    await (await throttled.send(jsonAuthRequest(EMAIL, "wrong", throttled.apiKey), JSON_IO))
      .body?.cancel();
  }
  const right = await fingerprint(
    await throttled.send(jsonAuthRequest(EMAIL, PASSWORD, throttled.apiKey), JSON_IO),
  );
  const wrong = await fingerprint(
    await throttled.send(jsonAuthRequest(EMAIL, "wrong", throttled.apiKey), JSON_IO),
  );
  assert.equal(right.status, 429);
  assert.deepEqual(right, wrong);
  await throttled.assertIntact();
});

Deno.test("[hostile 7] database locked by another connection: 503 with Retry-After, reads keep working", async () => {
  const db = tempDbPath();
  const store = openSqliteStore(db.path, { busyTimeoutMs: 100 });
  try {
    const clock = createFakeClock();
    const user = await store.insertUser({
      email: EMAIL,
      passwordHash: await realHasher.hash(PASSWORD),
      tokenTimeoutSeconds: null,
    }, { now: clock.now(), audit: undefined });
    const apiKey = generateApiKey();
    await store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret(apiKey),
      prefix: "x",
      label: "",
    }, { now: 0, audit: undefined });
    const handler = createHandler({
      store,
      hasher: realHasher,
      clock,
      logger: createCapturingLogger().logger,
      defaultTimeoutSeconds: 3600,
    });
    const token = await issueToken(handler, EMAIL, PASSWORD, apiKey);
    const other = new DatabaseSync(db.path);
    other.exec("BEGIN IMMEDIATE");
    const response = await handler(
      new Request(`${BASE}/api/userservice/tokens`, {
        method: "POST",
        body: xmlAuthRequest(EMAIL, PASSWORD, apiKey),
        headers: XML,
      }),
    );
    assert.doesNotMatch(
      await assertError(response, 503, "service_unavailable", "xml"),
      /SQLITE|locked|sqlite/,
    );
    assert.equal(response.headers.get("retry-after"), "1");
    const read = await secureGet(handler, CURRENT, apiKey, token);
    assert.equal(read.status, 200);
    await read.body?.cancel();
    other.exec("ROLLBACK");
    other.close();
    assert.equal(await store.countRows("tokens"), 1);
    await issueToken(handler, EMAIL, PASSWORD, apiKey); // recovered, no restart
    assert.equal(await store.countRows("tokens"), 2);
  } finally {
    await store.closeStore();
    db.cleanup();
  }
});

Deno.test("[hostile 8] canonical paths: no spelling of a secure path escapes authentication", async () => {
  const t = await setup();
  using _ = t;
  const spellings = [
    "/api/%73ecure/userservice/tokens/current",
    "/api/Secure/userservice/tokens/current",
    "/api/SECURE/x",
    "//secure//",
    "/x/../secure/",
    "/api/userservice/../secure/userservice/tokens/current",
    "/api/%53%45%43%55%52%45/x.json",
    "/api/./secure/./x",
  ];
  for (const path of spellings) {
    const response = await t.app.handler(new Request(BASE + path));
    await assertError(response, 401, "invalid_token", path.endsWith(".json") ? "json" : "xml");
    assert.match(response.headers.get("www-authenticate") ?? "", /^Bearer/, path);
  }
  // With credentials, an encoded spelling reaches the same endpoint.
  const encoded = await secureGet(
    t.app.handler,
    "/api/%73ecure/userservice/tokens/current",
    t.apiKey,
    t.token,
  );
  assert.equal(encoded.status, 200);
  assert.match(await encoded.text(), /<email>alice@example\.org<\/email>/);
  for (
    const path of [
      "/api/secure%2Fuserservice/tokens/current",
      "/api/%2e%2e%5csecure",
      "/a%00/secure",
      "/a/%zz",
      "/api/%20secure/userservice/tokens/current",
      "/api/secure+/x",
    ]
  ) {
    await assertError(await t.app.handler(new Request(BASE + path)), 400, "invalid_path");
  }
  await t.assertIntact();
});

Deno.test("[hostile 9] headers: HSTS, nosniff and no-store on every kind of response", async () => {
  const t = await setup({ hasher: createPasswordHasher({ workers: 1, queue: 0 }) });
  using _ = t;
  const responses = [
    await secureGet(t.app.handler, CURRENT, t.apiKey, t.token),
    await t.send("<auth_request>"),
    await t.send(jsonAuthRequest(EMAIL, "wrong", t.apiKey), JSON_IO),
    await t.app.handler(new Request(`${BASE}/api/nothing?api_key=${t.apiKey}`)),
    await t.send("x".repeat(20_000)),
    await t.app.handler(new Request(`${BASE}/healthz`)),
    await t.app.handler(new Request(`${BASE}/a`, { method: "OPTIONS" })),
    ...(await Promise.all(
      [1, 2, 3].map(() => t.send(jsonAuthRequest(EMAIL, "wrong", t.apiKey), JSON_IO)),
    )),
  ];
  const statuses = new Set<number>();
  for (const response of responses) {
    statuses.add(response.status);
    assert.equal(
      response.headers.get("strict-transport-security"),
      "max-age=31536000; includeSubDomains",
    );
    assert.equal(response.headers.get("x-content-type-options"), "nosniff");
    assert.equal(response.headers.get("cache-control"), "no-store");
    await response.body?.cancel();
  }
  assert.deepEqual([...statuses].sort(), [200, 204, 400, 401, 404, 413, 503]);
  await t.assertIntact();
});

Deno.test("[hostile 10] secrets never reach logs or error bodies; log lines cannot be forged", async () => {
  const t = await setup();
  using _ = t;
  const password = "canary-password-5f0c";
  const fakeToken = "canarytoken" + "0".repeat(29);
  const fakeKey = "c0ffee00-0000-4000-8000-00000000ca11";
  const bodies = [
    await (await t.send(jsonAuthRequest(EMAIL, password, t.apiKey), JSON_IO)).text(),
    await (await t.send(jsonAuthRequest(EMAIL, password, fakeKey), JSON_IO)).text(),
    await (await t.send(
      `{"auth_request":{"user":{"email":"${EMAIL}","password":["${password}"]}}}`,
      JSON_IO,
    )).text(),
    await (await t.send(
      `<auth_request><user><email>${EMAIL}</email><password>${password}</password><x/></user></auth_request>`,
    )).text(),
    await (await secureGet(t.app.handler, CURRENT, fakeKey, fakeToken)).text(),
    await (await secureGet(t.app.handler, CURRENT, t.apiKey, fakeToken)).text(),
    await (await t.app.handler(
      new Request(`${BASE}/api/x?api_key=${fakeKey}&password=${password}&token=${fakeToken}`),
    )).text(),
    await (await t.app.handler(
      new Request(`${BASE}${CURRENT}`, {
        headers: { authorization: `Bearer ${fakeToken}`, "x-api-key": fakeKey },
      }),
    )).text(),
  ];
  // An e-mail and a path crafted to forge a log line.
  const forged = `x@y.org\n{"level":"error","msg":"forged"}`;
  await (await t.send(jsonAuthRequest(forged, password, t.apiKey), JSON_IO)).body?.cancel();
  await (await t.app.handler(new Request(`${BASE}/api/%0A{"msg":"forged"}`))).body?.cancel();

  const secrets = [password, fakeToken, fakeKey, t.apiKey, t.token, PASSWORD];
  for (const text of [...bodies, ...t.app.logLines]) {
    for (const secret of secrets) assert.ok(!text.includes(secret), `leaked in: ${text}`);
  }
  for (const line of t.app.logLines) {
    const entry = JSON.parse(line); // every line is one whole JSON object
    assert.notEqual(entry.msg, "forged");
  }
  assert.ok(t.app.logLines.some((line) => line.includes("api_key=REDACTED")));
  await t.assertIntact();
});

Deno.test("[hostile 11] token cap: the 101st live token of a user and key revokes the oldest", async () => {
  const t = await setup();
  using _ = t;
  let newest = "";
  for (let i = 0; i < MAX_LIVE_TOKENS; i++) {
    newest = await issueToken(t.app.handler, EMAIL, PASSWORD, t.apiKey);
  }
  assert.equal(await t.app.store.countRows("tokens"), MAX_LIVE_TOKENS + 1);
  await assertError(
    await secureGet(t.app.handler, CURRENT, t.apiKey, t.token),
    401,
    "invalid_token",
  );
  const live = await secureGet(t.app.handler, CURRENT, t.apiKey, newest);
  assert.equal(live.status, 200);
  await live.body?.cancel();
  // The cap is per user and key: a token of the user's second key is untouched.
  const secondKey = await t.app.createKey(t.userId);
  const other = await issueToken(t.app.handler, EMAIL, PASSWORD, secondKey);
  await issueToken(t.app.handler, EMAIL, PASSWORD, t.apiKey);
  const untouched = await secureGet(t.app.handler, CURRENT, secondKey, other);
  assert.equal(untouched.status, 200);
  await untouched.body?.cancel();
  assert.equal(await t.app.store.countRows("users"), 1);
});

Deno.test("[hostile 12] slow clients: a body that trickles in past the deadline gets 408 and is never processed", async () => {
  const t = await setup({ bodyTimeoutMs: 150 });
  using _ = t;
  const bytes = new TextEncoder().encode(jsonAuthRequest(EMAIL, PASSWORD, t.apiKey));
  let offset = 0;
  const trickle = new ReadableStream<Uint8Array>({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (offset < bytes.length) controller.enqueue(bytes.subarray(offset, ++offset));
      else controller.close();
    },
  });
  const response = await t.send(trickle, JSON_IO);
  await assertError(response, 408, "request_timeout", "json");
  assert.ok(offset < bytes.length, "the whole body arrived");
  t.assertNotHashed();
  await t.assertIntact();
});
