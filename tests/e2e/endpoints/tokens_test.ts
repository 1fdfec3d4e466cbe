import assert from "node:assert/strict";
import { changeUserTimeout } from "../../../src/auth/users.ts";
import {
  assertError,
  issueToken,
  jsonAuthRequest,
  postToken,
  secureGet,
  xmlAuthRequest,
} from "../../_helpers/requests.ts";
import { createTestApp } from "../../_helpers/test_app.ts";

const TOKEN_XML =
  /^<\?xml version="1\.0" encoding="UTF-8" standalone="yes"\?><auth_response><access_token>([a-z0-9]{40})<\/access_token><\/auth_response>$/;

async function setup() {
  const app = await createTestApp();
  const userId = await app.addUser("alice@example.org", "correct horse");
  const apiKey = await app.createKey(userId);
  return { app, userId, apiKey };
}

Deno.test("[e2e] POST /api/userservice/tokens returns 200 and a token in XML by default", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const response = await postToken(
    app.handler,
    xmlAuthRequest("alice@example.org", "correct horse", apiKey),
    {
      "content-type": "application/xml",
    },
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/xml; charset=utf-8");
  assert.equal(response.headers.get("cache-control"), "no-store");
  const token = TOKEN_XML.exec(await response.text())?.[1];
  assert.ok(token);
  assert.equal(await app.store.countRows("tokens"), 1);
  assert.equal(
    (await secureGet(app.handler, "/api/secure/userservice/tokens/current", apiKey, token)).status,
    200,
  );
});

Deno.test("[e2e] POST /api/userservice/tokens returns JSON when Accept names application/json", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const response = await postToken(
    app.handler,
    jsonAuthRequest("alice@example.org", "correct horse", apiKey),
    {
      "content-type": "application/json",
      accept: "application/json",
    },
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  const body = await response.json();
  assert.deepEqual(Object.keys(body), ["auth_response"]);
  assert.match(body.auth_response.access_token, /^[a-z0-9]{40}$/);
});

Deno.test("[e2e] POST /api/userservice/tokens takes api_key from the query string and any letter case", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const response = await postToken(
    app.handler,
    jsonAuthRequest("ALICE@example.org", "correct horse"),
    { "content-type": "application/json" },
    `/api/userservice/tokens?api_key=${apiKey.toUpperCase()}`,
  );
  assert.equal(response.status, 200);
  assert.match(await response.text(), TOKEN_XML);
});

Deno.test("[e2e] POST /api/userservice/tokens answers every credential failure with one uniform 401", async () => {
  const { app, userId, apiKey } = await setup();
  using _ = app;
  const bobId = await app.addUser("bob@example.org", "bob password");
  const bobKey = await app.createKey(bobId);
  const revokedKey = await app.createKey(userId);
  await app.store.revokeApiKey((await app.store.listApiKeys(userId)).at(-1)!.id, {
    now: app.clock.now(),
    audit: undefined,
  });
  const carolId = await app.addUser("carol@example.org", "carol password");
  const carolKey = await app.createKey(carolId);
  await app.store.updateUserDisabled(carolId, {
    disabled: true,
    now: app.clock.now(),
    audit: undefined,
  });

  const attempts = [
    jsonAuthRequest("alice@example.org", "wrong", apiKey),
    jsonAuthRequest("nobody@example.org", "correct horse", apiKey),
    jsonAuthRequest("alice@example.org", "correct horse", "00000000-0000-4000-8000-000000000000"),
    jsonAuthRequest("alice@example.org", "correct horse", revokedKey),
    jsonAuthRequest("alice@example.org", "correct horse", bobKey),
    jsonAuthRequest("carol@example.org", "carol password", carolKey),
    // An e-mail no user can have (PostgreSQL's text cannot hold a NUL): no 500 on either store.
    jsonAuthRequest("alice\u0000@example.org", "correct horse", apiKey),
  ];
  const bodies = new Set<string>();
  for (const body of attempts) {
    const response = await postToken(app.handler, body, { "content-type": "application/json" });
    assert.equal(response.status, 401);
    assert.equal(response.headers.get("content-type"), "application/xml; charset=utf-8");
    bodies.add(await response.text());
  }
  assert.equal(bodies.size, 1);
  assert.match([...bodies][0], /<error_code>invalid_credentials<\/error_code>/);
  assert.equal(await app.store.countRows("tokens"), 0);
});

Deno.test("[e2e] POST /api/userservice/tokens never revokes the user's earlier tokens", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const tokens = [];
  for (let i = 0; i < 3; i++) {
    const response = await postToken(
      app.handler,
      jsonAuthRequest("alice@example.org", "correct horse", apiKey),
      {
        "content-type": "application/json",
        accept: "application/json",
      },
    );
    tokens.push((await response.json()).auth_response.access_token);
  }
  assert.equal(new Set(tokens).size, 3);
  for (const token of tokens) {
    assert.equal(
      (await secureGet(app.handler, "/api/secure/userservice/tokens/current", apiKey, token))
        .status,
      200,
    );
  }
});

Deno.test("[e2e] POST /api/userservice/tokens gives 400 for missing or malformed fields, storing nothing", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const cases: [string, RegExp][] = [
    [jsonAuthRequest("alice@example.org", "correct horse"), /missing api_key/],
    [jsonAuthRequest("alice@example.org", "correct horse", "not-a-uuid"), /api_key must be a UUID/],
    [jsonAuthRequest("", "correct horse", apiKey), /email must be 1 to 254/],
    [jsonAuthRequest("a".repeat(250) + "@b.org", "x", apiKey), /email must be 1 to 254/],
    [jsonAuthRequest("alice@example.org", "", apiKey), /password must be 1 to 1024 bytes/],
    [
      jsonAuthRequest("alice@example.org", "é".repeat(513), apiKey),
      /password must be 1 to 1024 bytes/,
    ],
    [`{"auth_request":{}}`, /auth_request.user/],
    [`{"auth_request":`, /Cannot parse request body/],
  ];
  for (const [body, message] of cases) {
    const response = await postToken(app.handler, body, {
      "content-type": "application/json",
      accept: "application/json",
    });
    assert.match(await assertError(response, 400, "invalid_request", "json"), message);
  }
  const conflicting = await postToken(
    app.handler,
    jsonAuthRequest("alice@example.org", "correct horse", apiKey),
    { "content-type": "application/json" },
    "/api/userservice/tokens?api_key=00000000-0000-4000-8000-000000000000",
  );
  await assertError(conflicting, 400, "invalid_request");
  assert.equal(await app.store.countRows("tokens"), 0);
});

Deno.test("[e2e] POST /api/userservice/tokens gives 413 and 415", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const huge = jsonAuthRequest("alice@example.org", "x".repeat(20_000), apiKey);
  await assertError(await postToken(app.handler, huge), 413, "request_too_large");
  await assertError(
    await postToken(app.handler, "email=a", {
      "content-type": "application/x-www-form-urlencoded",
    }),
    415,
    "unsupported_media_type",
  );
  assert.equal(await app.store.countRows("tokens"), 0);
});

Deno.test("[e2e] GET /api/userservice/tokens gives 405 with Allow", async () => {
  const { app } = await setup();
  using _ = app;
  const response = await app.handler(new Request("https://k.test/api/userservice/tokens"));
  await assertError(response, 405, "method_not_allowed");
  assert.equal(response.headers.get("allow"), "POST, OPTIONS");
});

Deno.test("[e2e] POST /api/userservice/tokens uses the user's own timeout, else the default", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  const shortId = await app.addUser("short@example.org", "pw", 2);
  const shortKey = await app.createKey(shortId);
  const { issueToken } = await import("../../_helpers/requests.ts");
  const short = await issueToken(app.handler, "short@example.org", "pw", shortKey);
  const long = await issueToken(app.handler, "alice@example.org", "correct horse", apiKey);
  const info = async (key: string, token: string) =>
    (await (await secureGet(app.handler, "/api/secure/userservice/tokens/current", key, token, {
      accept: "application/json",
    })).json()).token_info;
  assert.equal((await info(shortKey, short)).expires_in, 2);
  assert.equal((await info(apiKey, long)).expires_in, 36000);
});

Deno.test("[e2e] user set-timeout: tokens already issued keep the expiry they were issued with", async () => {
  await using app = await createTestApp();
  const userId = await app.addUser("alice@example.org", "correct horse", 3600);
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "correct horse", apiKey);
  const user = (await app.store.findUserByEmail("alice@example.org"))!;
  const deps = { store: app.store, clock: app.clock, actor: "cli:test" };
  // Shorter: the token issued for an hour still works after ten minutes...
  await changeUserTimeout(deps, user, 60);
  app.clock.advance(10 * 60_000);
  assert.equal(
    (await secureGet(app.handler, "/api/secure/userservice/tokens/current", apiKey, token)).status,
    200,
  );
  // ...and longer: it still ends after its hour.
  await changeUserTimeout(deps, user, 86_400);
  app.clock.advance(51 * 60_000);
  const ended = await secureGet(
    app.handler,
    "/api/secure/userservice/tokens/current",
    apiKey,
    token,
  );
  assert.equal(ended.status, 401);
  assert.match(await ended.text(), /token_expired/);
  // A token issued now gets the new lifetime.
  const next = await issueToken(app.handler, "alice@example.org", "correct horse", apiKey);
  app.clock.advance(2 * 3600_000);
  assert.equal(
    (await secureGet(app.handler, "/api/secure/userservice/tokens/current", apiKey, next)).status,
    200,
  );
});
