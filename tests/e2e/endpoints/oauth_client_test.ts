/**
 * Standard OAuth client authentication on introspection and revocation, and
 * RFC 8414 metadata, driven by a real off-the-shelf client (openid-client,
 * the library resource servers on Node and Deno use) through discovery,
 * introspection and revocation, with client_secret_basic and
 * client_secret_post; plus the raw answers such clients read on failure.
 */
import assert from "node:assert/strict";
import * as oauth from "openid-client";
import { generateApiKey } from "../../../src/auth/credentials.ts";
import { BASE, secureGet } from "../../_helpers/requests.ts";
import { type TestApp } from "../../_helpers/test_app.ts";
import { setUpResourceServer } from "../../_helpers/resource_server.ts";

const INTROSPECT = `${BASE}/api/userservice/tokens/introspect`;
const REVOKE = `${BASE}/api/userservice/tokens/revoke`;

async function setup() {
  const set = await setUpResourceServer();
  // Client ids are texts.
  return { ...set, apiKeyId: String(set.keyId), resourceKeyId: String(set.resourceKeyId) };
}

/** openid-client configured by discovery, its requests answered by the handler in process. */
function discover(
  app: TestApp,
  clientId: string,
  secret: string,
  method: "basic" | "post",
): Promise<oauth.Configuration> {
  const auth = method === "basic"
    ? oauth.ClientSecretBasic(secret)
    : oauth.ClientSecretPost(secret);
  return oauth.discovery(new URL(BASE), clientId, undefined, auth, {
    algorithm: "oauth2",
    [oauth.customFetch]: (url, options) => app.handler(new Request(url, options as RequestInit)),
  });
}

Deno.test("[oauth] GET /.well-known/oauth-authorization-server names both endpoints and both auth methods", async () => {
  const { app } = await setup();
  using _ = app;
  const response = await app.handler(
    new Request(`${BASE}/.well-known/oauth-authorization-server`, {
      headers: { accept: "application/json" },
    }),
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.equal(response.headers.get("vary"), "host");
  const methods = ["client_secret_basic", "client_secret_post"];
  assert.deepEqual(await response.json(), {
    issuer: BASE,
    introspection_endpoint: INTROSPECT,
    introspection_endpoint_auth_methods_supported: methods,
    revocation_endpoint: REVOKE,
    revocation_endpoint_auth_methods_supported: methods,
    response_types_supported: [],
    grant_types_supported: [],
  });
  // A HEAD for the same document, and no other method.
  const head = await app.handler(
    new Request(`${BASE}/.well-known/oauth-authorization-server`, { method: "HEAD" }),
  );
  assert.equal(head.status, 200);
  await head.body?.cancel();
  const post = await app.handler(
    new Request(`${BASE}/.well-known/oauth-authorization-server`, { method: "POST" }),
  );
  assert.equal(post.status, 405);
  assert.equal(post.headers.get("allow"), "GET, HEAD, OPTIONS");
  await post.body?.cancel();
});

Deno.test("[oauth] with --issuer the metadata names that origin whatever Host a request sends", async () => {
  const { app } = await setUpResourceServer(null, { issuer: "https://keys.example.org" });
  using _ = app;
  for (const host of ["localhost:8443", "attacker.example"]) {
    const response = await app.handler(
      new Request(`https://${host}/.well-known/oauth-authorization-server`),
    );
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal(response.headers.get("vary"), null);
    const body = await response.json();
    assert.equal(body.issuer, "https://keys.example.org");
    assert.equal(
      body.introspection_endpoint,
      "https://keys.example.org/api/userservice/tokens/introspect",
    );
    assert.equal(
      body.revocation_endpoint,
      "https://keys.example.org/api/userservice/tokens/revoke",
    );
  }
});

for (const method of ["basic", "post"] as const) {
  Deno.test(`[oauth] openid-client (client_secret_${method}) introspects an active and an inactive token`, async () => {
    const { app, userId, apiKeyId, token, resourceKey, resourceKeyId } = await setup();
    using _ = app;
    const config = await discover(app, resourceKeyId, resourceKey, method);
    assert.equal(config.serverMetadata().introspection_endpoint, INTROSPECT);
    const active = await oauth.tokenIntrospection(config, token);
    assert.equal(active.active, true);
    assert.equal(active.sub, String(userId));
    assert.equal(active.email, "alice@example.org");
    assert.equal(String(active.key_id), apiKeyId);
    assert.equal(typeof active.exp, "number");
    assert.deepEqual(
      await oauth.tokenIntrospection(config, "0".repeat(40)),
      { active: false },
    );
  });

  Deno.test(`[oauth] openid-client (client_secret_${method}) revokes a token of its own key, not another key's`, async () => {
    const { app, apiKey, apiKeyId, token, resourceKey, resourceKeyId } = await setup();
    using _ = app;
    // A resource server's key did not issue the token: 200, and the token stays live (RFC 7009).
    await oauth.tokenRevocation(await discover(app, resourceKeyId, resourceKey, method), token);
    const stillLive = await secureGet(
      app.handler,
      "/api/secure/userservice/tokens/current",
      apiKey,
      token,
    );
    assert.equal(stillLive.status, 200);
    await stillLive.body?.cancel();
    // The key the token was issued with revokes it.
    await oauth.tokenRevocation(await discover(app, apiKeyId, apiKey, method), token);
    const refused = await secureGet(
      app.handler,
      "/api/secure/userservice/tokens/current",
      apiKey,
      token,
    );
    assert.equal(refused.status, 401);
    await refused.body?.cancel();
    const [row] = await app.querySql(
      "SELECT count(*) AS n FROM tokens WHERE revoked_at IS NOT NULL",
    );
    assert.equal(Number(row.n), 1);
  });

  Deno.test(`[oauth] openid-client (client_secret_${method}) reads invalid_client for a wrong secret`, async () => {
    const { app, token, resourceKeyId } = await setup();
    using _ = app;
    const config = await discover(app, resourceKeyId, generateApiKey(), method);
    await assert.rejects(
      () => oauth.tokenIntrospection(config, token),
      (error: unknown) => {
        if (method === "basic") {
          // A 401 to Basic credentials carries a Basic challenge, which the client reports.
          assert.ok(error instanceof oauth.WWWAuthenticateChallengeError, String(error));
          assert.equal(error.status, 401);
          assert.equal(error.cause[0].scheme, "basic");
          assert.equal(error.cause[0].parameters.realm, "keygate");
        } else {
          assert.ok(error instanceof oauth.ResponseBodyError, String(error));
          assert.equal(error.error, "invalid_client");
          assert.equal(error.status, 401);
        }
        return true;
      },
    );
  });
}

function post(
  app: TestApp,
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return app.handler(
    new Request(url, {
      method: "POST",
      body,
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    }),
  );
}

function basic(id: string, secret: string): string {
  return `Basic ${btoa(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`)}`;
}

async function assertOAuthError(
  response: Response,
  status: number,
  error: string,
  challenge: boolean,
) {
  assert.equal(response.status, status);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.equal(response.headers.get("cache-control"), "no-store");
  assert.equal(
    response.headers.get("www-authenticate"),
    challenge ? 'Basic realm="keygate", charset="UTF-8"' : null,
  );
  const body = await response.json();
  assert.deepEqual(Object.keys(body).sort(), ["error", "error_description"]);
  assert.equal(body.error, error);
  return body.error_description as string;
}

Deno.test("[oauth] RFC 6749 errors: a wrong id, a key that may not introspect, malformed credentials", async () => {
  const { app, apiKey, apiKeyId, token, resourceKey, resourceKeyId } = await setup();
  using _ = app;
  // The right key under another key's id does not authenticate.
  await assertOAuthError(
    await post(app, INTROSPECT, `token=${token}`, { authorization: basic(apiKeyId, resourceKey) }),
    401,
    "invalid_client",
    true,
  );
  // The same through client_secret_post.
  await assertOAuthError(
    await post(
      app,
      INTROSPECT,
      `token=${token}&client_id=${apiKeyId}&client_secret=${resourceKey}`,
    ),
    401,
    "invalid_client",
    false,
  );
  // A user's key authenticates but may not introspect.
  const described = await assertOAuthError(
    await post(app, INTROSPECT, `token=${token}`, { authorization: basic(apiKeyId, apiKey) }),
    400,
    "unauthorized_client",
    false,
  );
  assert.match(described, /may not introspect/);
  // Not base64, no colon, or only half of client_secret_post.
  for (const authorization of ["Basic !!!", `Basic ${btoa("no-colon")}`, "Basic"]) {
    await assertOAuthError(
      await post(app, INTROSPECT, `token=${token}`, { authorization }),
      401,
      "invalid_client",
      true,
    );
  }
  await assertOAuthError(
    await post(app, INTROSPECT, `token=${token}&client_id=${resourceKeyId}`),
    400,
    "invalid_request",
    false,
  );
  await assertOAuthError(
    await post(
      app,
      REVOKE,
      `token=${token}&client_id=${resourceKeyId}&client_secret=${resourceKey}&client_secret=x`,
    ),
    400,
    "invalid_request",
    false,
  );
  // No secret leaks into the description.
  const response = await post(app, INTROSPECT, `token=${token}`, {
    authorization: basic(resourceKeyId, generateApiKey()),
  });
  assert.doesNotMatch(await response.text(), /[0-9a-f]{8}-[0-9a-f]{4}-/);
});

Deno.test("[oauth] one way to authenticate per request; X-Api-Key keeps keygate's own errors", async () => {
  const { app, token, resourceKey, resourceKeyId } = await setup();
  using _ = app;
  const twice = await assertOAuthError(
    await post(app, INTROSPECT, `token=${token}`, {
      authorization: basic(resourceKeyId, resourceKey),
      "x-api-key": resourceKey,
    }),
    400,
    "invalid_request",
    false,
  );
  assert.match(twice, /more than one way/);
  await assertOAuthError(
    await post(
      app,
      INTROSPECT,
      `token=${token}&client_id=${resourceKeyId}&client_secret=${resourceKey}`,
      { authorization: basic(resourceKeyId, resourceKey) },
    ),
    400,
    "invalid_request",
    false,
  );
  // The X-Api-Key way: keygate's error_response, as before.
  const wrong = await post(app, INTROSPECT, `token=${token}`, {
    "x-api-key": generateApiKey(),
    accept: "application/json",
  });
  assert.equal(wrong.status, 401);
  assert.equal((await wrong.json()).error_response.errors.error[0].error_code, "invalid_api_key");
  // And the X-Api-Key way still works with the key in the header.
  const ok = await post(app, INTROSPECT, `token=${token}`, {
    "x-api-key": resourceKey,
    accept: "application/json",
  });
  assert.equal((await ok.json()).active, true);
});
