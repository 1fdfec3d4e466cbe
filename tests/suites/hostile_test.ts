/**
 * The hostile-input suite of issue 4 (items 1-5 here, 6-12 in hostile_service_test.ts): one case
 * per item, each through the real handler over a real store, asserting the status, the error body in
 * the caller's format, and that stored data did not change (row counts, the
 * existing token still valid). Items 4, 7 and 9 have deeper suites in
 * throttle_test.ts, faults_test.ts and tls_test.ts.
 */
import assert from "node:assert/strict";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { assertError, jsonAuthRequest, xmlAuthRequest } from "../_helpers/requests.ts";
import { EMAIL, JSON_IO, PASSWORD, setup, toXmlMessage, XML } from "../_helpers/hostile_app.ts";

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
