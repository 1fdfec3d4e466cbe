import assert from "node:assert/strict";
import { assertError, BASE, issueToken, secureGet } from "../../_helpers/requests.ts";
import { createTestApp } from "../../_helpers/test_app.ts";

const CURRENT = "/api/secure/userservice/tokens/current";

async function setup(timeoutSeconds: number | null = null) {
  const app = await createTestApp();
  const userId = await app.addUser("alice@example.org", "pw", timeoutSeconds);
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  return { app, userId, apiKey, token };
}

Deno.test("[e2e] GET /api/secure/userservice/tokens/current returns token_info in XML", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  const response = await secureGet(app.handler, CURRENT, apiKey, token);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/xml; charset=utf-8");
  assert.equal(
    await response.text(),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><token_info><email>alice@example.org</email>' +
      "<expires_at>2026-01-01T10:00:00.000Z</expires_at><expires_in>36000</expires_in></token_info>",
  );
});

Deno.test("[e2e] GET /api/secure/userservice/tokens/current accepts Authorization: Bearer and X-Api-Key", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  const response = await app.handler(
    new Request(BASE + CURRENT + ".json", {
      headers: { authorization: `Bearer ${token}`, "x-api-key": apiKey.toUpperCase() },
    }),
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.deepEqual(await response.json(), {
    token_info: {
      email: "alice@example.org",
      expires_at: "2026-01-01T10:00:00.000Z",
      expires_in: 36000,
    },
  });
});

Deno.test("[e2e] a token expires after the user's timeout with 401 token_expired, and a new one works", async () => {
  const { app, apiKey, token } = await setup(2);
  using _ = app;
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, token)).status, 200);
  app.clock.advance(1999);
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, token)).status, 200);
  app.clock.advance(1001);
  const expired = await secureGet(app.handler, CURRENT, apiKey, token);
  await assertError(expired, 401, "token_expired");
  assert.equal(
    expired.headers.get("www-authenticate"),
    'Bearer realm="keygate", error="token_expired"',
  );
  const fresh = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  assert.notEqual(fresh, token);
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, fresh)).status, 200);
});

Deno.test("[e2e] secure requests refuse a missing, unknown or foreign token with 401 invalid_token", async () => {
  const { app, userId, apiKey, token } = await setup();
  using _ = app;
  const otherKey = await app.createKey(userId);
  const cases: [string, Record<string, string>][] = [
    [`${CURRENT}?api_key=${apiKey}`, {}],
    [`${CURRENT}?api_token=${token}`, {}],
    [`${CURRENT}?api_key=${apiKey}&api_token=${"a".repeat(40)}`, {}],
    [`${CURRENT}?api_key=${otherKey}&api_token=${token}`, {}],
    [`${CURRENT}?api_key=nonsense&api_token=${token}`, {}],
    [`${CURRENT}?api_key=${apiKey}&api_token=${token.toUpperCase()}`, {}],
    [`${CURRENT}?api_key=${apiKey}`, { authorization: `Basic ${btoa("a:b")}` }],
  ];
  for (const [path, headers] of cases) {
    const response = await app.handler(new Request(BASE + path, { headers }));
    await assertError(response, 401, "invalid_token");
    assert.equal(
      response.headers.get("www-authenticate"),
      'Bearer realm="keygate", error="invalid_token"',
    );
  }
});

Deno.test("[e2e] secure requests fail once the key is revoked or the user disabled", async () => {
  const { app, userId, apiKey, token } = await setup();
  using _ = app;
  await app.store.updateUserDisabled(userId, {
    disabled: true,
    now: app.clock.now(),
    audit: undefined,
  });
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
  await app.store.updateUserDisabled(userId, {
    disabled: false,
    now: app.clock.now(),
    audit: undefined,
  });
  const second = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  await app.store.revokeApiKey((await app.store.listApiKeys(userId))[0].id, {
    now: app.clock.now(),
    audit: undefined,
  });
  await assertError(await secureGet(app.handler, CURRENT, apiKey, second), 401, "invalid_token");
});

Deno.test("[e2e] DELETE /api/secure/userservice/tokens/current revokes that token only", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  const other = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  const url = `${BASE}${CURRENT}?api_key=${apiKey}&api_token=${token}`;
  const response = await app.handler(new Request(url, { method: "DELETE" }));
  assert.equal(response.status, 204);
  assert.equal(await response.text(), "");
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, other)).status, 200);
  assert.equal(await app.store.countRows("tokens"), 2);
});

Deno.test("[e2e] other secure paths authenticate first, then answer 404", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  await assertError(
    await app.handler(new Request(`${BASE}/api/secure/anything`)),
    401,
    "invalid_token",
  );
  await assertError(
    await secureGet(app.handler, "/api/secure/anything", apiKey, token),
    404,
    "not_found",
  );
  await assertError(
    await secureGet(app.handler, "/api/%73ecure/x", apiKey, "b".repeat(40)),
    401,
    "invalid_token",
  );
});

Deno.test("[e2e] POST /api/secure/userservice/tokens/current gives 405 with Allow after authenticating", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  const url = `${BASE}${CURRENT}?api_key=${apiKey}&api_token=${token}`;
  const response = await app.handler(new Request(url, { method: "POST", body: "{}" }));
  await assertError(response, 405, "method_not_allowed");
  assert.equal(response.headers.get("allow"), "GET, DELETE, OPTIONS");
});
