/**
 * The hostile-input suite of issue 4: one named case per item, each through
 * the real handler over a real store, asserting the status, the error body in
 * the caller's format, and that stored data did not change (row counts, the
 * existing token still valid). Items 4, 7 and 9 have deeper suites in
 * throttle_test.ts, faults_test.ts and tls_test.ts.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { createHandler } from "../../src/http/app.ts";
import type { AppDeps } from "../../src/http/context.ts";
import { generateApiKey, hashSecret } from "../../src/auth/credentials.ts";
import { createPasswordHasher, type PasswordHasher } from "../../src/passwords/passwords.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import type { ThrottleRules } from "../../src/auth/throttle.ts";
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
import { createTestApp } from "../_helpers/test_app.ts";

const EMAIL = "alice@example.org";
const PASSWORD = "correct horse";
const CURRENT = "/api/secure/userservice/tokens/current";
const XML = { "content-type": "application/xml" };
const JSON_IO = { "content-type": "application/json", accept: "application/json" };
/** Throttling out of the way, for cases about something else. */
const LENIENT: ThrottleRules = {
  account: { threshold: 1000, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
  client: { threshold: 1000, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
};
const realHasher = createPasswordHasher();

/** A test app with one user, key and live token, and a count of password checks. */
async function setup(options: Partial<AppDeps> = {}) {
  let verifies = 0;
  const base = options.hasher ?? realHasher;
  const hasher: PasswordHasher = {
    hash: (password) => base.hash(password),
    verify(passwordHash, password) {
      verifies++;
      return base.verify(passwordHash, password);
    },
    close() {},
  };
  const app = await createTestApp({ throttleRules: LENIENT, ...options, hasher });
  const userId = await app.addUser(EMAIL, PASSWORD);
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  const counts = async () => ({
    users: await app.store.countRows("users"),
    api_keys: await app.store.countRows("api_keys"),
    tokens: await app.store.countRows("tokens"),
  });
  let before = await counts();
  const verifiesBefore = verifies;
  return {
    [Symbol.dispose]() {
      app.close();
      if (base !== realHasher) base.close();
    },
    app,
    userId,
    apiKey,
    token,
    send(body: BodyInit, headers: Record<string, string> = XML, path = "/api/userservice/tokens") {
      return app.handler(new Request(BASE + path, { method: "POST", body, headers }));
    },
    /** No password was checked since setup. */
    assertNotHashed() {
      assert.equal(verifies, verifiesBefore, "a password was checked");
    },
    /** Takes the current row counts as the ones to keep. */
    async mark() {
      before = await counts();
    },
    /** Row counts as after setup (or `mark`), and the setup token still valid. */
    async assertIntact() {
      assert.deepEqual(await counts(), before);
      const response = await secureGet(app.handler, CURRENT, apiKey, token);
      assert.equal(response.status, 200, "the existing token no longer validates");
      await response.body?.cancel();
    },
  };
}

/** The `error_message` of an XML `error_response`, unescaped. */
function toXmlMessage(xml: string): string {
  const escaped = /<error_message>(.*)<\/error_message>/s.exec(xml)?.[1] ?? "";
  const entities: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
  return escaped.replace(/&(lt|gt|amp|quot|apos);/g, (_, name: string) => entities[name]);
}

/** Headers and body of a response, without the per-request ones. */
async function fingerprint(response: Response) {
  const headers = [...response.headers].filter(([name]) =>
    name !== "date" && name !== "x-request-id"
  );
  return { status: response.status, headers, body: await response.text() };
}

Deno.test("[hostile 1] XML: DTDs, entities, malformed, deep, repeated, unknown and non-UTF-8 documents get 400", async () => {
  const t = await setup();
  using _ = t;
  const fields = `<user><email>${EMAIL}</email><password>${PASSWORD}</password></user>` +
    `<api_key>${t.apiKey}</api_key>`;
  const cases: [string, BodyInit, RegExp][] = [
    [
      "billion laughs",
      `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>` +
      `<auth_request><user><email>&lol2;</email><password>x</password></user></auth_request>`,
      /DOCTYPE and ENTITY declarations are not allowed/,
    ],
    [
      "external entity",
      `<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><auth_request>${fields}</auth_request>`,
      /DOCTYPE and ENTITY/,
    ],
    [
      "lower-case doctype",
      `<!doctype auth_request><auth_request>${fields}</auth_request>`,
      /DOCTYPE/,
    ],
    ["bare entity", `<auth_request><!EnTiTy x "y">${fields}</auth_request>`, /ENTITY/],
    ["not well-formed", `<auth_request><user><email>a</user></auth_request>`, /Cannot parse XML/],
    ["unclosed", `<auth_request>${fields}`, /Cannot parse XML/],
    [
      "deep nesting",
      `<auth_request>${"<a>".repeat(40)}${"</a>".repeat(40)}${fields}</auth_request>`,
      /Cannot parse/,
    ],
    [
      "repeated field",
      `<auth_request><user><email>${EMAIL}</email><email>x@y.org</email>` +
      `<password>p</password></user></auth_request>`,
      /user\/email> is given more than once/,
    ],
    [
      "unknown element",
      `<auth_request>${fields}<role>admin</role></auth_request>`,
      /unexpected element <role>/,
    ],
    ["two roots", `<auth_request>${fields}</auth_request><auth_request/>`, /Cannot parse/],
    ["wrong root", `<login>${fields}</login>`, /expected root element "auth_request"/],
    [
      "element instead of text",
      `<auth_request><user><email><b>${EMAIL}</b></email><password>p</password></user></auth_request>`,
      /must contain text/,
    ],
    [
      "invalid UTF-8",
      new Uint8Array([...new TextEncoder().encode("<auth_request><user><email>"), 0xff, 0xfe]),
      /not valid UTF-8/,
    ],
  ];
  for (const [name, body, message] of cases) {
    const response = await t.send(body);
    const xml = await assertError(response, 400, "invalid_request", "xml");
    assert.match(toXmlMessage(xml), message, name);
  }
  t.assertNotHashed();
  await t.assertIntact();

  // Values are taken exactly as sent: never trimmed, never turned into numbers.
  const numericId = await t.app.addUser("numeric@example.org", " 0123 ");
  const numericKey = await t.app.createKey(numericId);
  const exact = await t.send(xmlAuthRequest("numeric@example.org", " 0123 ", numericKey));
  assert.equal(exact.status, 200);
  await exact.body?.cancel();
  await assertError(
    await t.send(xmlAuthRequest("numeric@example.org", "123", numericKey)),
    401,
    "invalid_credentials",
  );
  // Attributes are ignored, not read as fields.
  const attributes = await t.send(
    `<auth_request api_key="x"><user><email role="admin">${EMAIL}</email>` +
      `<password>${PASSWORD}</password></user><api_key>${t.apiKey}</api_key></auth_request>`,
  );
  assert.equal(attributes.status, 200);
  await attributes.body?.cancel();
});

Deno.test("[hostile 2] JSON: non-strings, __proto__ and duplicate keys get 400 or have no effect", async () => {
  const t = await setup();
  using _ = t;
  const request = (user: string, extra = "") =>
    `{"auth_request":{"user":${user},"api_key":"${t.apiKey}"${extra}}}`;
  const cases: [string, string, RegExp][] = [
    ["number", request(`{"email":${12345},"password":"x"}`), /"auth_request.user.email" must be/],
    ["object", request(`{"email":"${EMAIL}","password":{"$ne":""}}`), /password" must be a string/],
    ["array", request(`{"email":["${EMAIL}"],"password":"x"}`), /email" must be a string/],
    ["null", request(`{"email":null,"password":"x"}`), /email" must be a string/],
    [
      "boolean key",
      `{"auth_request":{"user":{"email":"a@b.org","password":"x"},"api_key":true}}`,
      /api_key" must be a string/,
    ],
    [
      "__proto__ carrying the fields",
      request(`{"__proto__":{"email":"${EMAIL}","password":"${PASSWORD}"}}`),
      /missing "auth_request.user.email"/,
    ],
    [
      "duplicate key",
      request(`{"email":"x@y.org","email":"${EMAIL}","password":"${PASSWORD}"}`),
      /duplicate key "email"/,
    ],
    ["duplicate root", `{"auth_request":{},"auth_request":{}}`, /duplicate key "auth_request"/],
    // JSON5 ends a // comment at a carriage return too: the repeat after it still counts.
    [
      "duplicate key after a comment ended by CR",
      request(`{'email':"x@y.org", // c\r'email':"${EMAIL}","password":"${PASSWORD}"}`),
      /duplicate key "email"/,
    ],
    ["not JSON", `{"auth_request":`, /Cannot parse JSON/],
    ["top-level array", `[1,2]`, /expected a JSON object/],
    // Deeper than the call stack: a RangeError (500) before nesting was bounded.
    [
      "deep nesting",
      request(`{"email":"${EMAIL}","password":${"[".repeat(5000)}${"]".repeat(5000)}}`),
      /nested deeper than 32 levels/,
    ],
    ["deep objects", request(`${'{"a":'.repeat(2000)}1${"}".repeat(2000)}`), /nested deeper/],
  ];
  for (const [name, body, message] of cases) {
    const response = await t.send(body, JSON_IO);
    assert.match(await assertError(response, 400, "invalid_request", "json"), message, name);
  }
  t.assertNotHashed();
  await t.assertIntact();

  // Extra __proto__ and constructor keys change nothing: the login is just a login.
  const polluted = await t.send(
    request(
      `{"email":"${EMAIL}","password":"${PASSWORD}","__proto__":{"admin":true}}`,
      `,"constructor":{"prototype":{"admin":true}}`,
    ),
    JSON_IO,
  );
  assert.equal(polluted.status, 200);
  assert.deepEqual(Object.keys((await polluted.json()).auth_response), ["access_token"]);
  assert.equal(({} as Record<string, unknown>).admin, undefined);
});

Deno.test("[hostile 3] bodies: over the cap 413, stalled 408, broken 400, over-long fields 400, none hashed", async () => {
  const t = await setup({ bodyTimeoutMs: 100 });
  using _ = t;
  let pulled = false;
  const declared = new ReadableStream({ pull: () => void (pulled = true) }, { highWaterMark: 0 });
  await assertError(
    await t.send(declared, { ...XML, "content-length": "16385" }),
    413,
    "request_too_large",
  );
  assert.equal(pulled, false, "read a body whose Content-Length was over the cap");

  let sent = 0;
  const endless = new ReadableStream<Uint8Array>({
    pull(controller) {
      sent += 4096;
      controller.enqueue(new TextEncoder().encode("<".repeat(4096)));
    },
  });
  await assertError(await t.send(endless), 413, "request_too_large");
  assert.ok(sent <= 24 * 1024, `read ${sent} bytes`);

  const stalled = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(jsonAuthRequest(EMAIL, PASSWORD).slice(0, 20)));
    },
  });
  await assertError(await t.send(stalled, JSON_IO), 408, "request_timeout", "json");

  // A body cut off mid-way is never processed, even though its start is a valid request.
  const whole = jsonAuthRequest(EMAIL, PASSWORD, t.apiKey);
  const broken = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(whole));
      controller.error(new Error("connection reset"));
    },
  });
  await assertError(await t.send(broken, JSON_IO), 400, "invalid_request", "json");

  const fields: [string, RegExp][] = [
    [
      jsonAuthRequest("a".repeat(243) + "@example.org", PASSWORD, t.apiKey),
      /email must be 1 to 254/,
    ],
    [jsonAuthRequest(EMAIL, "p".repeat(1025), t.apiKey), /password must be 1 to 1024 bytes/],
    [jsonAuthRequest(EMAIL, "€".repeat(342), t.apiKey), /password must be 1 to 1024 bytes/],
    [jsonAuthRequest(EMAIL, PASSWORD, t.apiKey.slice(1)), /api_key must be a UUID/],
    [jsonAuthRequest(EMAIL, PASSWORD, t.apiKey + "0"), /api_key must be a UUID/],
  ];
  for (const [body, message] of fields) {
    assert.match(
      await assertError(await t.send(body, JSON_IO), 400, "invalid_request", "json"),
      message,
    );
  }
  t.assertNotHashed();
  await t.assertIntact();
});

Deno.test("[hostile 4] brute force: 429 with Retry-After after 5 failures with the user's key, in the caller's format", async () => {
  const t = await setup({ throttleRules: undefined });
  using _ = t;
  for (let i = 0; i < 5; i++) {
    await assertError(
      await t.send(xmlAuthRequest(EMAIL, `guess ${i}`, t.apiKey)),
      401,
      "invalid_credentials",
    );
  }
  const throttled = await t.send(xmlAuthRequest(EMAIL, PASSWORD, t.apiKey));
  assert.match(
    await assertError(throttled, 429, "too_many_attempts", "xml"),
    /Too many failed logins/,
  );
  assert.equal(throttled.headers.get("retry-after"), "1");
  await t.assertIntact();
});

Deno.test("[hostile 5] bounded hashing: a full queue gives 503 service_busy at once", async () => {
  // A worker that takes a second per job: all six requests reach the pool before any job ends,
  // however slowly the store (PostgreSQL under load) lets them through.
  const t = await setup({
    hasher: createPasswordHasher({
      workers: 1,
      queue: 1,
      workerUrl: new URL("../_helpers/slow_password_worker.ts", import.meta.url),
    }),
  });
  using _ = t;
  const responses = await Promise.all(
    Array.from({ length: 6 }, () => t.send(jsonAuthRequest(EMAIL, "wrong", t.apiKey), JSON_IO)),
  );
  const statuses = responses.map((r) => r.status).sort();
  assert.deepEqual(statuses, [401, 401, 503, 503, 503, 503]);
  for (const response of responses) {
    if (response.status === 503) {
      await assertError(response, 503, "service_busy", "json");
      assert.equal(response.headers.get("retry-after"), "1");
    } else {
      await assertError(response, 401, "invalid_credentials", "json");
    }
  }
  await t.assertIntact();
});

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
