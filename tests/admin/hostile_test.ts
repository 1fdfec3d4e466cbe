/**
 * Hostile input on the admin API never gets a 5xx or a stack trace: random
 * methods, paths built from real and mangled segments, query strings and
 * bodies, by a write operator (the widest reach), always answer 2xx or 4xx in
 * the API's JSON error format, and nothing secret comes back.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { ADMIN_BASE, createAdminTest } from "../_helpers/admin_api.ts";

const SEGMENTS = [
  "admin",
  "v1",
  "users",
  "keys",
  "tokens",
  "audit",
  "throttle",
  "stats",
  "history",
  "clear",
  "revoke",
  "rotate",
  "disable",
  "enable",
  "password",
  "token-timeout",
  "1",
  "0",
  "-1",
  "99999999999999999999",
  "1e3",
  "%00",
  "%zz",
  "..",
  "%2F",
  "😀",
  "",
];

const BODIES = [
  undefined,
  "",
  "{",
  "null",
  "[]",
  '"x"',
  "{}",
  '{"email":"a@b.org","password":"x"}',
  '{"email":{"$gt":""},"password":1}',
  '{"token_timeout":"-1h"}',
  '{"grace":"99999999999d"}',
  '{"before":"not a time"}',
  '{"target":""}',
  '{"label":"' + "x".repeat(5000) + '"}',
  '{"__proto__":{"admin":true}}',
];

Deno.test("[admin] hostile methods, paths, queries and bodies never get a 5xx", async () => {
  await using t = await createAdminTest();
  const userId = await t.addUser("ann@example.org");
  await t.call("POST", `/admin/v1/users/${userId}/keys`, { body: {} });
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"),
      fc.array(fc.constantFrom(...SEGMENTS), { minLength: 0, maxLength: 6 }),
      fc.boolean(),
      fc.constantFrom(
        "",
        "?limit=0",
        "?limit=999",
        "?cursor=x",
        "?cursor=WyJhIiwxXQ",
        "?from=x&to=y",
        "?search=%",
        "?live=maybe",
        "?unused=1y",
        "?cursor=%FF",
        "?cursor=WyJhXHUwMDAwIl0",
        "?actor=%00",
        "?search=%00",
      ),
      fc.constantFrom(...BODIES),
      fc.constantFrom("application/json", "text/plain", "application/json; charset=utf-16"),
      async (method, segments, prefixed, query, body, type) => {
        const path = (prefixed ? "/admin/v1/" : "/") + segments.join("/") + query;
        const hasBody = body !== undefined && method !== "GET" && method !== "HEAD";
        let response: Response;
        try {
          response = await t.admin(
            new Request(ADMIN_BASE + path, {
              method,
              headers: {
                authorization: `Bearer ${t.writeToken}`,
                ...(hasBody ? { "content-type": type } : {}),
              },
              body: hasBody ? body : undefined,
            }),
            { remoteAddr: { hostname: "192.0.2.10" } },
          );
        } catch (error) {
          // Only a URL the Request constructor itself refuses may throw, never the handler.
          assert.ok(error instanceof TypeError, `${method} ${path}: ${error}`);
          return;
        }
        assert.ok(response.status < 500, `${method} ${path} ${body}: ${response.status}`);
        const text = method === "HEAD" ? "" : await response.text();
        assert.equal(text.includes(t.writeToken), false);
        assert.equal(/at .*\.ts:\d+/.test(text), false, "no stack trace");
        if (response.status >= 400 && method !== "HEAD") {
          assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
          assert.equal(typeof JSON.parse(text).error.code, "string");
        }
      },
    ),
    { numRuns: 400 },
  );
  assert.equal(t.logLines.some((line) => line.includes('"level":"error"')), false);
});

Deno.test("[admin] a NUL or other control character in a query value or a cursor is 400, not a database error", async () => {
  await using t = await createAdminTest();
  const cursor = (keys: unknown[]) =>
    btoa(JSON.stringify(keys)).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
  const paths = [
    `/admin/v1/users?cursor=${cursor(["a\u0000"])}`,
    `/admin/v1/keys?cursor=${cursor(["a\u0000", 1])}`,
    `/admin/v1/throttle?cursor=${cursor([0, "x\u0000"])}`,
    "/admin/v1/audit?actor=%00",
    "/admin/v1/audit?subject=user%3Aa%0Ab",
    "/admin/v1/users?search=%00",
    "/admin/v1/users?%00=1",
  ];
  for (const path of paths) {
    const response = await t.admin(
      new Request(ADMIN_BASE + path, { headers: { authorization: `Bearer ${t.readToken}` } }),
      { remoteAddr: { hostname: "192.0.2.10" } },
    );
    assert.equal(response.status, 400, path);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal((await response.json()).error.code, "invalid_request", path);
  }
  assert.equal(t.logLines.some((line) => line.includes('"level":"error"')), false);
});
