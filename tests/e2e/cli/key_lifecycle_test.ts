/**
 * Key lifecycle end to end: the admin CLI changes the database that the real
 * handler reads, with one injected clock for both (tokens: token_cutoff_test.ts).
 */
import assert from "node:assert/strict";
import { assertError, BASE, issueToken } from "../../_helpers/requests.ts";
import {
  admin,
  assertTokenFails,
  assertTokenWorks,
  createKey,
  EMAIL,
  HOUR,
  listKeys,
  PASSWORD,
  requestToken,
  setup,
  UUID,
} from "../../_helpers/lifecycle_app.ts";

Deno.test("[e2e] a key created with --expires works until then and fails like an invalid key after", async () => {
  const { app } = await setup();
  using _ = app;
  const start = app.clock.now();
  const apiKey = await createKey(app, "--expires", "1h", "--label", "ci");
  const token = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  // The 10 h token is capped by its key's expiry.
  const info = await assertTokenWorks(app, apiKey, token);
  assert.equal(info.expires_at, new Date(start + HOUR).toISOString());
  let [row] = await listKeys(app);
  assert.equal(row.status, "active");
  assert.equal(row.expires_at, new Date(start + HOUR).toISOString());

  app.clock.advance(HOUR - 1);
  await assertTokenWorks(app, apiKey, token);
  app.clock.advance(1);
  await assertTokenFails(app, apiKey, token);
  await assertError(await requestToken(app, apiKey), 401, "invalid_credentials", "json");
  const other = await app.handler(
    new Request(`${BASE}/api/public/projects?api_key=${apiKey}`),
  );
  await assertError(other, 401, "invalid_api_key");
  [row] = await listKeys(app);
  assert.equal(row.status, "expired");
  const failed = (await app.store.listAudit()).filter((entry) => entry.action === "login.failed");
  assert.equal(failed.length, 1);
  assert.equal(failed[0].detail.reason, "key_expired");
  assert.equal(await app.store.countRows("tokens"), 1);
});

Deno.test("[e2e] key disable stops a key and its tokens until key enable", async () => {
  const { app } = await setup();
  using _ = app;
  const apiKey = await createKey(app);
  const token = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  const disabled = await admin(app, ["key", "disable", apiKey]);
  assert.equal(disabled.out, "API key 1 disabled");
  assert.equal((await admin(app, ["key", "disable", "1"])).out, "API key 1 was already disabled");
  await assertTokenFails(app, apiKey, token);
  await assertError(await requestToken(app, apiKey), 401, "invalid_credentials", "json");
  assert.equal((await listKeys(app))[0].status, "disabled");
  assert.equal((await admin(app, ["key", "enable", "1"])).out, "API key 1 enabled");
  await assertTokenWorks(app, apiKey, token);
  assert.equal((await requestToken(app, apiKey)).status, 200);
  await admin(app, ["key", "revoke", "1"]);
  const refused = await admin(app, ["key", "enable", "1"]);
  assert.equal(refused.code, 1);
  assert.equal(refused.err, "keygate admin: API key 1 is revoked");
});

Deno.test("[e2e] key rotate: both keys work during the grace period, only the new one after", async () => {
  const { app } = await setup();
  using _ = app;
  const oldKey = await createKey(app, "--label", "billing");
  const before = await issueToken(app.handler, EMAIL, PASSWORD, oldKey);
  await assertTokenWorks(app, oldKey, before);

  const rotatedAt = app.clock.now();
  const rotated = await admin(app, ["key", "rotate", "1", "--grace", "1h"]);
  assert.equal(rotated.code, 0, rotated.err);
  const newKey = rotated.lastLine;
  assert.match(newKey, UUID);
  assert.notEqual(newKey, oldKey);
  assert.match(
    rotated.out,
    new RegExp(
      `Rotated API key 1 to 2; key 1 and its tokens work until ${
        new Date(rotatedAt + HOUR).toISOString().replaceAll("../..", "\\.")
      }`,
    ),
  );
  const [oldRow, newRow] = await listKeys(app);
  assert.deepEqual(
    [oldRow.status, oldRow.replaced_by, oldRow.expires_at, newRow.label, newRow.email],
    ["active", 2, new Date(rotatedAt + HOUR).toISOString(), "billing", EMAIL],
  );
  assert.equal(newRow.expires_at, null);
  const again = await admin(app, ["key", "rotate", "1"]);
  assert.equal(again.code, 1);
  assert.equal(
    again.err,
    "keygate admin: Cannot rotate API key 1: it was already rotated to key 2",
  );

  // During the grace period: the old key, its old and new tokens, and the new key all work.
  app.clock.advance(HOUR / 2);
  assert.equal(
    (await assertTokenWorks(app, oldKey, before)).expires_at,
    new Date(rotatedAt + HOUR).toISOString(),
  );
  const during = await issueToken(app.handler, EMAIL, PASSWORD, oldKey);
  await assertTokenWorks(app, oldKey, during);
  const fresh = await issueToken(app.handler, EMAIL, PASSWORD, newKey);
  await assertTokenWorks(app, newKey, fresh);
  await assertTokenFails(app, newKey, before); // a token stays bound to its own key

  // After it: only the new key and its tokens.
  app.clock.advance(HOUR / 2);
  await assertTokenFails(app, oldKey, before);
  await assertTokenFails(app, oldKey, during);
  await assertError(await requestToken(app, oldKey), 401, "invalid_credentials", "json");
  await assertTokenWorks(app, newKey, fresh);
  assert.equal((await requestToken(app, newKey)).status, 200);
  assert.deepEqual((await listKeys(app)).map((k) => k.status), ["expired", "active"]);
});

Deno.test("[e2e] key rotate never extends the old key beyond its own expiry; the successor keeps the lifetime", async () => {
  const { app } = await setup();
  using _ = app;
  const created = app.clock.now();
  const oldKey = await createKey(app, "--expires", "2h");
  app.clock.advance(HOUR + HOUR / 2);
  const rotatedAt = app.clock.now();
  const rotated = await admin(app, ["key", "rotate", oldKey]); // default grace 24h
  assert.equal(rotated.code, 0, rotated.err);
  const [oldRow, newRow] = await listKeys(app);
  assert.equal(oldRow.expires_at, new Date(created + 2 * HOUR).toISOString());
  assert.equal(newRow.expires_at, new Date(rotatedAt + 2 * HOUR).toISOString());
  app.clock.advance(HOUR / 2);
  await assertError(await requestToken(app, oldKey), 401, "invalid_credentials", "json");
  assert.equal((await requestToken(app, rotated.lastLine)).status, 200);

  const now = await admin(app, ["key", "rotate", "2", "--grace", "0"]);
  assert.equal(now.code, 0, now.err);
  await assertError(await requestToken(app, rotated.lastLine), 401, "invalid_credentials", "json");
  const expired = await admin(app, ["key", "rotate", "2"]);
  assert.equal(expired.err, "keygate admin: Cannot rotate API key 2: it is expired");
});

Deno.test("admin --help lists the lifecycle commands and options", async () => {
  const { app } = await setup();
  using _ = app;
  await createKey(app);
  const help = (await admin(app, ["--help"])).out;
  for (
    const text of [
      "key create EMAIL",
      "key list [EMAIL]",
      "key rotate KEY",
      "key disable KEY",
      "key enable KEY",
      "token revoke-all EMAIL",
      "audit",
    ]
  ) {
    assert.ok(help.includes(text), text);
  }
  const usages: [string[], string][] = [
    [
      ["key", "create"],
      "key create EMAIL [--label TEXT] [--expires DURATION] [--introspect] [--json]",
    ],
    [["key", "list"], "key list [EMAIL] [--unused DURATION] [--json]"],
    [["key", "rotate"], "key rotate KEY [--grace DURATION]"],
    [["token", "revoke-all"], "token revoke-all EMAIL [--before TIME]"],
    [["audit"], "audit [--since TIME] [--json]"],
  ];
  for (const [words, usage] of usages) {
    const result = await admin(app, ["help", ...words]);
    assert.equal(result.code, 0);
    assert.ok(result.out.startsWith(`Usage: deno task admin ${usage}\n`), result.out);
  }
  const misplaced = await admin(app, ["key", "disable", "1", "--grace", "1h"]);
  assert.equal(misplaced.code, 2);
  assert.match(misplaced.err, /Option --grace does not apply to "key disable"/);
  const badGrace = await admin(app, ["key", "rotate", "1", "--grace", "soon"]);
  assert.equal(badGrace.code, 2);
  assert.match(badGrace.err, /Invalid --grace "soon": expected a whole number and a unit/);
  assert.equal((await listKeys(app))[0].replaced_by, null);
});
