import assert from "node:assert/strict";
import { assertError, BASE, issueToken } from "../../_helpers/requests.ts";
import { createTestApp } from "../../_helpers/test_app.ts";

const VERIFY = `${BASE}/api/userservice/verify`;

async function setup(timeoutSeconds: number | null = null) {
  const app = await createTestApp();
  const userId = await app.addUser("alice@example.org", "pw", timeoutSeconds);
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  return { app, userId, apiKey, token, keyId: (await app.store.listApiKeys(userId))[0].id };
}

function verify(
  app: { handler: (request: Request) => Promise<Response> },
  headers: Record<string, string>,
  method = "GET",
) {
  return app.handler(new Request(VERIFY, { method, headers }));
}

Deno.test("[e2e] GET /api/userservice/verify answers 200 with identity headers for a secure URI with key and token", async () => {
  const { app, userId, apiKey, token, keyId } = await setup();
  using _ = app;
  const byQuery = await verify(app, {
    "x-original-uri": `/api/secure/givingservice/donations?api_key=${apiKey}&api_token=${token}`,
    "x-original-method": "POST",
  });
  assert.equal(byQuery.status, 200);
  assert.equal(await byQuery.text(), "");
  assert.equal(byQuery.headers.get("x-keygate-user"), String(userId));
  assert.equal(byQuery.headers.get("x-keygate-email"), "alice@example.org");
  assert.equal(byQuery.headers.get("x-keygate-key-id"), String(keyId));

  // The proxy passes the client's headers on: key and token in headers work too.
  const byHeaders = await verify(app, {
    "x-forwarded-uri": "/api/secure/givingservice/donations",
    "x-forwarded-method": "DELETE",
    "x-api-key": apiKey,
    authorization: `Bearer ${token}`,
  });
  assert.equal(byHeaders.status, 200);
  assert.equal(byHeaders.headers.get("x-keygate-user"), String(userId));
});

Deno.test("[e2e] /api/userservice/verify refuses a secure URI without a valid token, as the gate does", async () => {
  const { app, apiKey, token } = await setup(60);
  using _ = app;
  const missing = await verify(app, { "x-original-uri": `/api/secure/x?api_key=${apiKey}` });
  await assertError(missing, 401, "invalid_token");
  assert.equal(
    missing.headers.get("www-authenticate"),
    'Bearer realm="keygate", error="invalid_token"',
  );
  assert.equal(missing.headers.get("x-keygate-user"), null);
  // Every spelling of a secure path is secure.
  for (const uri of ["//secure//x", "/api/%73ecure/x", "/API/Secure/x", "/api/Secure.json/y"]) {
    await assertError(
      await verify(app, { "x-original-uri": `${uri}?api_key=${apiKey}` }),
      401,
      "invalid_token",
    );
  }
  app.clock.advance(60_000);
  await assertError(
    await verify(app, { "x-original-uri": `/api/secure/x?api_key=${apiKey}&api_token=${token}` }),
    401,
    "token_expired",
  );
});

Deno.test("[e2e] /api/userservice/verify needs only the API key for a public URI", async () => {
  const { app, userId, apiKey } = await setup();
  using _ = app;
  const ok = await verify(app, { "x-original-uri": `/api/public/projects?api_key=${apiKey}` });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get("x-keygate-user"), String(userId));
  const json = await verify(app, {
    "x-original-uri": "/api/public/projects",
    accept: "application/json",
  });
  await assertError(json, 401, "invalid_api_key", "json");
  // A .json suffix on the original path decides the error format, as on the gate.
  await assertError(
    await verify(app, { "x-original-uri": "/api/public/projects.json" }),
    401,
    "invalid_api_key",
    "json",
  );
  await app.store.updateUserDisabled(userId, {
    disabled: true,
    now: app.clock.now(),
    audit: undefined,
  });
  await assertError(
    await verify(app, { "x-original-uri": `/api/public/projects?api_key=${apiKey}` }),
    401,
    "invalid_api_key",
  );
});

Deno.test("[e2e] /api/userservice/verify verifies every method, OPTIONS and POST included", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  const uri = `/api/secure/x?api_key=${apiKey}&api_token=${token}`;
  for (const method of ["POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]) {
    const response = await verify(app, { "x-original-uri": uri }, method);
    assert.equal(response.status, 200, method);
    await response.body?.cancel();
  }
  // OPTIONS is not answered as a CORS preflight here: it needs credentials.
  const preflight = await verify(app, { "x-original-uri": "/api/secure/x" }, "OPTIONS");
  await assertError(preflight, 401, "invalid_token");
});

Deno.test("[e2e] /api/userservice/verify answers 400 without an original URI and 403 for a path it cannot route", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  await assertError(await verify(app, {}), 400, "invalid_request");
  await assertError(
    await verify(app, { "x-original-uri": "https://evil.example/x" }),
    400,
    "invalid_request",
  );
  await assertError(
    await verify(app, { "x-original-uri": "/x", "x-original-method": "G E T" }),
    400,
    "invalid_request",
  );
  await assertError(
    await verify(app, { "x-original-uri": `/api/a%2Fsecure/x?api_key=${apiKey}` }),
    403,
    "invalid_path",
  );
});
