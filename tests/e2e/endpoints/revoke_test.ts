import assert from "node:assert/strict";
import { assertError, BASE, issueToken, secureGet } from "../../_helpers/requests.ts";
import { createTestApp, type TestApp } from "../../_helpers/test_app.ts";

const REVOKE = `${BASE}/api/userservice/tokens/revoke`;
const CURRENT = "/api/secure/userservice/tokens/current";

function revoke(app: TestApp, apiKey: string | undefined, body: string, type?: string) {
  const headers: Record<string, string> = {
    "content-type": type ?? "application/x-www-form-urlencoded",
  };
  if (apiKey !== undefined) headers["x-api-key"] = apiKey;
  return app.handler(new Request(REVOKE, { method: "POST", body, headers }));
}

async function revokedAt(app: TestApp): Promise<(number | null)[]> {
  const rows = await app.querySql("SELECT revoked_at FROM tokens ORDER BY id");
  return rows.map((row) => row.revoked_at as number | null);
}

async function setup() {
  const app = await createTestApp();
  const userId = await app.addUser("alice@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  return { app, userId, apiKey, token };
}

Deno.test("[e2e] POST /api/userservice/tokens/revoke revokes the token at once", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  const other = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, token)).status, 200);
  const response = await revoke(app, apiKey, `token=${token}&token_type_hint=access_token`);
  assert.equal(response.status, 200);
  assert.equal(await response.text(), "");
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, other)).status, 200);
  assert.deepEqual(await revokedAt(app), [app.clock.now(), null]);
  assert.ok(app.logLines.some((line) => JSON.parse(line).event === "token_revoked"));
  const audit = (await app.store.listAudit()).filter((entry) => entry.action === "token.revoked");
  assert.deepEqual(
    audit.map(({ at, actor, subject, detail }) => ({ at, actor, subject, detail })),
    [{
      at: app.clock.now(),
      actor: "api_key:1",
      subject: "token:1",
      detail: { user: "alice@example.org", client: "unknown" },
    }],
  );
  // Again, later: still 200, nothing changes (the first revocation time stays, no new audit row).
  const revokedFirst = app.clock.now();
  app.clock.advance(5000);
  const again = await revoke(app, apiKey, JSON.stringify({ token }), "application/json");
  assert.equal(again.status, 200);
  assert.equal(await again.text(), "");
  assert.deepEqual(await revokedAt(app), [revokedFirst, null]);
  assert.equal((await app.store.listAudit()).filter((e) => e.action === "token.revoked").length, 1);
});

Deno.test("[e2e] POST /api/userservice/tokens/revoke answers 200 for unknown tokens and leaves other keys' tokens alone", async () => {
  const { app, userId, apiKey, token } = await setup();
  using _ = app;
  const secondKey = await app.createKey(userId);
  const bobId = await app.addUser("bob@example.org", "pw");
  const bobKey = await app.createKey(bobId);
  for (const body of [`token=${"z".repeat(40)}`, "token=garbage"]) {
    const response = await revoke(app, apiKey, body);
    assert.equal(response.status, 200);
  }
  // Only the key a token was issued with may revoke it: the same user's other key cannot.
  for (const key of [secondKey, bobKey]) {
    assert.equal((await revoke(app, key, `token=${token}`)).status, 200);
  }
  assert.equal((await secureGet(app.handler, CURRENT, apiKey, token)).status, 200);
  assert.deepEqual(await revokedAt(app), [null]);
});

Deno.test("[e2e] POST /api/userservice/tokens/revoke needs an API key and a token", async () => {
  const { app, apiKey, token } = await setup();
  using _ = app;
  await assertError(await revoke(app, undefined, `token=${token}`), 401, "invalid_api_key");
  await assertError(await revoke(app, apiKey, "nothing=here"), 400, "invalid_request");
  await assertError(
    await revoke(
      app,
      apiKey,
      `<token_request><token>${token}</token></token_request>`,
      "text/html",
    ),
    415,
    "unsupported_media_type",
  );
  assert.deepEqual(await revokedAt(app), [null]);
  const xml = await revoke(
    app,
    apiKey,
    `<token_request><token>${token}</token></token_request>`,
    "application/xml",
  );
  assert.equal(xml.status, 200);
  assert.equal((await revokedAt(app))[0], app.clock.now());
});
