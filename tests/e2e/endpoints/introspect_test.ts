import assert from "node:assert/strict";
import { assertError, BASE, issueToken, secureGet } from "../../_helpers/requests.ts";
import { type TestApp } from "../../_helpers/test_app.ts";
import { setUpResourceServer } from "../../_helpers/resource_server.ts";

const INTROSPECT = `${BASE}/api/userservice/tokens/introspect`;

const setup = setUpResourceServer;

function introspect(
  app: TestApp,
  apiKey: string,
  body: string,
  contentType = "application/x-www-form-urlencoded",
  accept = "application/json",
) {
  return app.handler(
    new Request(INTROSPECT, {
      method: "POST",
      body,
      headers: { "x-api-key": apiKey, "content-type": contentType, accept },
    }),
  );
}

async function assertInactive(response: Response) {
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.deepEqual(await response.json(), { active: false });
}

Deno.test("[e2e] POST /api/userservice/tokens/introspect describes an active token (form in, JSON out)", async () => {
  const { app, userId, token, resourceKey, keyId } = await setup();
  using _ = app;
  const response = await introspect(
    app,
    resourceKey,
    `token=${token}&token_type_hint=access_token`,
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  assert.equal(response.headers.get("cache-control"), "no-store");
  const issued = Date.parse("2026-01-01T00:00:00Z") / 1000;
  assert.deepEqual(await response.json(), {
    active: true,
    sub: String(userId),
    email: "alice@example.org",
    key_id: keyId,
    iat: issued,
    exp: issued + 36000,
  });
});

Deno.test("[e2e] POST /api/userservice/tokens/introspect reads JSON and XML and answers in XML", async () => {
  const { app, userId, token, resourceKey, keyId } = await setup();
  using _ = app;
  const fromJson = await introspect(
    app,
    resourceKey,
    JSON.stringify({ token }),
    "application/json",
  );
  assert.equal((await fromJson.json()).active, true);
  const xml = await introspect(
    app,
    resourceKey,
    `<?xml version="1.0"?><token_request><token>${token}</token></token_request>`,
    "application/xml",
    "application/xml",
  );
  assert.equal(xml.status, 200);
  assert.equal(xml.headers.get("content-type"), "application/xml; charset=utf-8");
  assert.equal(
    await xml.text(),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><token_introspection><active>true</active>' +
      `<sub>${userId}</sub><email>alice@example.org</email><key_id>${keyId}</key_id>` +
      "<iat>1767225600</iat><exp>1767261600</exp></token_introspection>",
  );
  const inactive = await introspect(app, resourceKey, "token=nope", undefined, "application/xml");
  assert.equal(
    await inactive.text(),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><token_introspection><active>false</active></token_introspection>',
  );
});

Deno.test("[e2e] POST /api/userservice/tokens/introspect says active:false for expired and revoked tokens, revoked keys' and disabled users' tokens", async () => {
  const { app, userId, apiKey, token, resourceKey } = await setup(60);
  using _ = app;
  app.clock.advance(60_000);
  await assertInactive(await introspect(app, resourceKey, `token=${token}`));

  const second = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  const deleted = await app.handler(
    new Request(
      `${BASE}/api/secure/userservice/tokens/current?api_key=${apiKey}&api_token=${second}`,
      { method: "DELETE" },
    ),
  );
  assert.equal(deleted.status, 204);
  await assertInactive(await introspect(app, resourceKey, `token=${second}`));

  const third = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  assert.equal((await (await introspect(app, resourceKey, `token=${third}`)).json()).active, true);
  await app.store.revokeApiKey((await app.store.listApiKeys(userId))[0].id, {
    now: app.clock.now(),
    audit: undefined,
  });
  await assertInactive(await introspect(app, resourceKey, `token=${third}`));

  // A disabled user's token: only the flag is set (no cutoff), so the rule itself is tested.
  const otherKey = await app.createKey(userId);
  const fourth = await issueToken(app.handler, "alice@example.org", "pw", otherKey);
  assert.equal((await (await introspect(app, resourceKey, `token=${fourth}`)).json()).active, true);
  await app.querySql(`UPDATE users SET disabled = 1 WHERE id = ${userId}`);
  await assertInactive(await introspect(app, resourceKey, `token=${fourth}`));
  assert.equal(
    (await app.store.findApiKeyById((await app.store.listApiKeys(userId))[1].id))!.revokedAt,
    null,
  );
});

Deno.test("[e2e] POST /api/userservice/tokens/introspect says active:false for foreign and malformed tokens", async () => {
  const { app, resourceKey } = await setup();
  using _ = app;
  // A token issued by another keygate (another database) means nothing here.
  const other = await setup();
  using _other = other.app;
  await assertInactive(await introspect(app, resourceKey, `token=${other.token}`));
  await assertInactive(await introspect(app, resourceKey, `token=${"a".repeat(40)}`));
  await assertInactive(await introspect(app, resourceKey, "token=not-a-token"));
});

Deno.test("[e2e] POST /api/userservice/tokens/introspect is for resource-server keys only", async () => {
  const { app, apiKey, token, resourceKey, userId } = await setup();
  using _ = app;
  const ordinary = await introspect(app, apiKey, `token=${token}`);
  const message = await assertError(ordinary, 403, "forbidden", "json");
  assert.match(message, /may not introspect/);
  await assertError(
    await app.handler(new Request(INTROSPECT, { method: "POST", body: `token=${token}` })),
    401,
    "invalid_api_key",
  );
  const revokedId = (await app.store.listApiKeys()).find((k) => k.userId !== userId)!.id;
  await app.store.revokeApiKey(revokedId, { now: app.clock.now(), audit: undefined });
  await assertError(
    await introspect(app, resourceKey, `token=${token}`),
    401,
    "invalid_api_key",
    "json",
  );
});

Deno.test("[e2e] POST /api/userservice/tokens/introspect refuses a malformed body with 4xx", async () => {
  const { app, resourceKey, token } = await setup();
  using _ = app;
  const cases: [string, string | undefined, number, string][] = [
    ["", "application/x-www-form-urlencoded", 400, "invalid_request"],
    ["token_type_hint=access_token", "application/x-www-form-urlencoded", 400, "invalid_request"],
    [`token=${token}&token=${token}`, "application/x-www-form-urlencoded", 400, "invalid_request"],
    ['{"token": 5}', "application/json", 400, "invalid_request"],
    ["[1]", "application/json", 400, "invalid_request"],
    ["<other><token>x</token></other>", "application/xml", 400, "invalid_request"],
    [
      "<token_request><token>a</token><token>b</token></token_request>",
      "text/xml",
      400,
      "invalid_request",
    ],
    ["<token_request><evil>a</evil></token_request>", "text/xml", 400, "invalid_request"],
    [`token=${token}`, "text/plain", 415, "unsupported_media_type"],
  ];
  for (const [body, type, status, code] of cases) {
    const response = await introspect(app, resourceKey, body, type);
    await assertError(response, status, code, "json");
  }
  const unsupported = await introspect(app, resourceKey, "token=x", "text/plain");
  assert.match(
    await assertError(unsupported, 415, "unsupported_media_type", "json"),
    /application\/x-www-form-urlencoded/,
  );
  const wrongMethod = await app.handler(
    new Request(`${INTROSPECT}?api_key=${resourceKey}`),
  );
  await assertError(wrongMethod, 405, "method_not_allowed");
  assert.equal(wrongMethod.headers.get("allow"), "POST, OPTIONS");
});

Deno.test("[e2e] POST /api/userservice/tokens/introspect: a token seen active is inactive once it expires", async () => {
  const { app, token, resourceKey } = await setup(60);
  using _ = app;
  for (let i = 0; i < 2; i++) {
    assert.equal(
      (await (await introspect(app, resourceKey, `token=${token}`)).json()).active,
      true,
    );
  }
  app.clock.advance(60_000);
  await assertInactive(await introspect(app, resourceKey, `token=${token}`));
});

Deno.test("[e2e] a token stored with an expiry beyond a Date's range works until the latest Date, never a 500", async () => {
  // A user timeout stored before durations were capped (about 31 billion years).
  const { app, userId, apiKey, resourceKey } = await setup(1e15);
  using _ = app;
  const MAX_ISO = "+275760-09-13T00:00:00.000Z";
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  const stored = await app.querySql(
    `SELECT expires_at FROM tokens WHERE user_id = ${userId} ORDER BY id DESC LIMIT 1`,
  );
  assert.equal(Number(stored[0].expires_at), 8_640_000_000_000_000, "the login capped it");
  // Then one beyond 2^53, written by hand.
  await app.querySql(
    `UPDATE tokens SET expires_at = 9000000000000000000 WHERE user_id = ${userId}`,
  );
  const current = await secureGet(
    app.handler,
    "/api/secure/userservice/tokens/current",
    apiKey,
    token,
    { accept: "application/json" },
  );
  assert.equal(current.status, 200);
  assert.equal(current.headers.get("content-type"), "application/json; charset=utf-8");
  const info = (await current.json()).token_info;
  assert.equal(info.email, "alice@example.org");
  assert.equal(info.expires_at, MAX_ISO);
  assert.equal(info.expires_in, Math.floor((8_640_000_000_000_000 - app.clock.now()) / 1000));
  const response = await introspect(app, resourceKey, `token=${token}`);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  const body = await response.json();
  assert.deepEqual([body.active, body.exp], [true, 8_640_000_000_000]);
  const xml = await introspect(app, resourceKey, `token=${token}`, undefined, "application/xml");
  assert.equal(xml.status, 200);
  assert.match(await xml.text(), /<exp>8640000000000<\/exp>/);
});
