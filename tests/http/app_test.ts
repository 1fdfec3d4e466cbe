import assert from "node:assert/strict";
import fc from "fast-check";
import { assertError, BASE, issueToken } from "../_helpers/requests.ts";
import { TEST_STORE_NAME } from "../_helpers/store.ts";
import { createTestApp } from "../_helpers/test_app.ts";
import { startRawServer } from "../_helpers/raw_http.ts";

Deno.test("[e2e] GET /healthz answers without an API key", async () => {
  using app = await createTestApp();
  const response = await app.handler(new Request(`${BASE}/healthz`));
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.deepEqual(await response.json(), { status: "ok" });
});

Deno.test("[e2e] GET /readyz reports the database, and 503 once it is closed", async () => {
  using app = await createTestApp();
  const ready = await app.handler(new Request(`${BASE}/readyz`));
  assert.equal(ready.status, 200);
  assert.deepEqual(await ready.json(), { status: "ready" });
  await app.store.closeStore();
  const gone = await app.handler(new Request(`${BASE}/readyz`));
  assert.equal(gone.status, 503);
  assert.deepEqual(await gone.json(), { status: "unavailable" });
});

Deno.test({
  name: "[e2e] GET /readyz answers 503 once the database file is deleted",
  ignore: TEST_STORE_NAME !== "sqlite", // a file to delete; tests/e2e/postgres/service_test.ts stops a server
  async fn() {
    using app = await createTestApp();
    assert.equal((await app.handler(new Request(`${BASE}/readyz`))).status, 200);
    Deno.removeSync(app.dbPath);
    const gone = await app.handler(new Request(`${BASE}/readyz`));
    assert.equal(gone.status, 503);
    assert.equal(gone.headers.get("content-type"), "application/json; charset=utf-8");
    assert.deepEqual(await gone.json(), { status: "unavailable" });
    const alive = await app.handler(new Request(`${BASE}/healthz`));
    assert.equal(alive.status, 200, "liveness does not depend on the database");
    await alive.body?.cancel();
  },
});

Deno.test("[e2e] unknown paths need a known API key, then answer 404", async () => {
  using app = await createTestApp();
  const userId = await app.addUser("a@b.org", "pw");
  const apiKey = await app.createKey(userId);
  await assertError(await app.handler(new Request(`${BASE}/api/nothing`)), 401, "invalid_api_key");
  await assertError(
    await app.handler(
      new Request(`${BASE}/api/nothing?api_key=00000000-0000-4000-8000-000000000000`),
    ),
    401,
    "invalid_api_key",
  );
  await assertError(
    await app.handler(new Request(`${BASE}/api/nothing?api_key=${apiKey}`)),
    404,
    "not_found",
  );
  const header = await app.handler(
    new Request(`${BASE}/api/nothing.json`, { headers: { "x-api-key": apiKey } }),
  );
  await assertError(header, 404, "not_found", "json");
});

Deno.test("[e2e] every response carries the security headers and a request id", async () => {
  using app = await createTestApp();
  for (const path of ["/healthz", "/api/nothing", "/api/secure/x", "/api/userservice/tokens"]) {
    const response = await app.handler(new Request(BASE + path));
    await response.body?.cancel();
    assert.equal(
      response.headers.get("strict-transport-security"),
      "max-age=31536000; includeSubDomains",
    );
    assert.equal(response.headers.get("x-content-type-options"), "nosniff");
    assert.equal(response.headers.get("cache-control"), "no-store");
    assert.match(response.headers.get("x-request-id")!, /^[0-9a-f]{8}-[0-9a-z]+$/);
  }
});

Deno.test("[e2e] an Accept that names neither format gets 406", async () => {
  using app = await createTestApp();
  const response = await app.handler(
    new Request(`${BASE}/healthz`, { headers: { accept: "text/html" } }),
  );
  await assertError(response, 406, "not_acceptable");
});

Deno.test("[e2e] OPTIONS answers a CORS preflight on any path with 204", async () => {
  using app = await createTestApp();
  const response = await app.handler(
    new Request(`${BASE}/api/userservice/tokens`, {
      method: "OPTIONS",
      headers: {
        origin: "https://partner.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, accept, pragma, cache-control",
      },
    }),
  );
  assert.equal(response.status, 204);
  assert.equal(response.headers.get("access-control-allow-origin"), "*");
  assert.equal(response.headers.get("access-control-allow-methods"), "GET, POST, DELETE, OPTIONS");
  assert.equal(
    response.headers.get("access-control-allow-headers"),
    "content-type, accept, pragma, cache-control",
  );
});

Deno.test("[e2e] CORS with a list of origins echoes only a listed one", async () => {
  using app = await createTestApp({ corsOrigins: ["https://partner.example"] });
  const ask = (origin: string) =>
    app.handler(new Request(`${BASE}/healthz`, { headers: { origin } }));
  const listed = await ask("https://partner.example");
  assert.equal(listed.headers.get("access-control-allow-origin"), "https://partner.example");
  assert.equal(listed.headers.get("vary"), "Origin");
  const other = await ask("https://evil.example");
  assert.equal(other.headers.get("access-control-allow-origin"), null);
});

Deno.test("[e2e] request log lines are JSON and never hold a secret", async () => {
  using app = await createTestApp();
  const userId = await app.addUser("a@b.org", "canary-password-1");
  const apiKey = await app.createKey(userId);
  const { issueToken, secureGet } = await import("../_helpers/requests.ts");
  const token = await issueToken(app.handler, "a@b.org", "canary-password-1", apiKey);
  await secureGet(app.handler, "/api/secure/userservice/tokens/current", apiKey, token);
  await app.handler(new Request(`${BASE}/x?api_key=${apiKey}&api_token=${token}&other=1`));
  assert.ok(app.logLines.length >= 3);
  for (const line of app.logLines) {
    const entry = JSON.parse(line);
    assert.equal(typeof entry.time, "string");
    for (const secret of ["canary-password-1", apiKey, token]) {
      assert.ok(!line.includes(secret), line);
    }
  }
  const last = JSON.parse(app.logLines.at(-1)!);
  assert.equal(last.path, "/x?api_key=REDACTED&api_token=REDACTED&other=1");
  assert.equal(last.status, 404);
});

Deno.test("the query as the gate reads it is url.searchParams, for every query", () => {
  // HandlerContext.query parses the query as sent; the URL parser percent-encodes some of its
  // characters (and any non-ASCII one) first. Form decoding must give the same parameters.
  const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i))
    .filter((c) => c !== "#" && c !== " ");
  fc.assert(
    fc.property(
      fc.string({ unit: fc.constantFrom(...printable, "%2", "%41", "=", "&", "é", "😀") }),
      (q) => {
        const search = "?" + q;
        const url = new URL("https://k.test/x" + search);
        assert.deepEqual([...new URLSearchParams(search)], [...url.searchParams]);
      },
    ),
    { numRuns: 2000 },
  );
});

Deno.test("[e2e] credentials in the query are read however their names and values are escaped", async () => {
  await using app = await createTestApp();
  const userId = await app.addUser("q@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "q@example.org", "pw", apiKey);
  await using server = await startRawServer(app.handler);
  const get = (query: string) =>
    server.send(
      `GET /api/secure/userservice/tokens/current.json?${query} HTTP/1.1\r\nHost: 127.0.0.1`,
    );
  const spelled = [
    `api_key=${apiKey}&api_token=${token}`,
    `api%5Fkey=${apiKey}&api%5ftoken=${token}`,
    `api_key=${encodeURIComponent(apiKey).replaceAll("-", "%2D")}&x=%22%3C&api_token=${token}`,
    `api_key=+${apiKey}+&api_token=${token}`,
  ];
  for (const query of spelled) {
    const response = await get(query);
    assert.equal(response.status, 200, query);
    assert.equal(JSON.parse(response.body).token_info.email, "q@example.org", query);
  }
  // Raw controls never reach the handler: Deno.serve refuses the request line.
  for (const raw of ["\t", "\x01", "\x7f"]) {
    const response = await get(`api_key=${apiKey}${raw}&api_token=${token}`);
    assert.equal(response.status, 400, JSON.stringify(raw));
  }
});
