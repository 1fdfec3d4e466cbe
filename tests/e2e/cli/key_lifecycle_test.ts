/**
 * Key and token lifecycle end to end: the admin CLI changes the database
 * that the real handler reads, with one injected clock for both.
 */
import assert from "node:assert/strict";
import { runAdmin } from "../../_helpers/admin_cli.ts";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { createPasswordHasher, type PasswordHasher } from "../../../src/passwords/passwords.ts";
import {
  assertError,
  BASE,
  issueToken,
  jsonAuthRequest,
  postToken,
  secureGet,
} from "../../_helpers/requests.ts";
import { createTestApp, type TestApp } from "../../_helpers/test_app.ts";

const CURRENT = "/api/secure/userservice/tokens/current";
const EMAIL = "alice@example.org";
const PASSWORD = "correct horse";
const HOUR = 3600_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const hasher = createPasswordHasher();

/** Runs the admin CLI in-process on the app's database and clock. */
function admin(app: TestApp, args: string[], password = "new password") {
  return runAdmin(app.dbPath, args, { password, env: { USER: "tester" }, clock: app.clock });
}

async function setup(options: { trackKeyUsage?: boolean; hasher?: PasswordHasher } = {}) {
  const app = await createTestApp(options);
  const userId = await app.addUser(EMAIL, PASSWORD);
  return { app, userId };
}

async function createKey(app: TestApp, ...flags: string[]): Promise<string> {
  const created = await admin(app, ["key", "create", EMAIL, ...flags]);
  assert.equal(created.code, 0, created.err);
  assert.match(created.lastLine, UUID);
  return created.lastLine;
}

async function listKeys(app: TestApp, ...args: string[]) {
  const listed = await admin(app, ["key", "list", ...args, "--json"]);
  assert.equal(listed.code, 0, listed.err);
  return JSON.parse(listed.out) as Record<string, string | number | null>[];
}

function requestToken(app: TestApp, apiKey: string): Promise<Response> {
  return postToken(app.handler, jsonAuthRequest(EMAIL, PASSWORD, apiKey), {
    "content-type": "application/json",
    accept: "application/json",
  });
}

async function assertTokenWorks(app: TestApp, apiKey: string, token: string) {
  const response = await secureGet(app.handler, CURRENT, apiKey, token, {
    accept: "application/json",
  });
  assert.equal(response.status, 200, await response.clone().text());
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  return (await response.json()).token_info as { email: string; expires_at: string };
}

async function assertTokenFails(app: TestApp, apiKey: string, token: string) {
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
}

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

Deno.test("[e2e] token revoke-all --before rejects tokens issued before the cutoff, keeps those at or after it", async () => {
  const { app } = await setup();
  using _ = app;
  const apiKey = await createKey(app);
  const second5 = Date.parse("2026-01-01T00:00:05Z");
  const tokenAt = async (ms: number) => {
    app.clock.set(ms);
    return await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  };
  const earlier = await tokenAt(second5 - 1_000);
  const lastMsBefore = await tokenAt(second5 - 1);
  const atCutoff = await tokenAt(second5); // same second and same millisecond as the cutoff
  const sameSecond = await tokenAt(second5 + 500);
  const later = await tokenAt(second5 + 3_000);
  app.clock.set(second5 + 10_000);

  const result = await admin(app, [
    "token",
    "revoke-all",
    EMAIL,
    "--before",
    "2026-01-01T00:00:05Z",
  ]);
  assert.equal(result.code, 0, result.err);
  assert.equal(
    result.out,
    `Revoked 2 live token(s) of ${EMAIL} (issued before 2026-01-01T00:00:05.000Z)`,
  );
  await assertTokenFails(app, apiKey, earlier);
  await assertTokenFails(app, apiKey, lastMsBefore);
  await assertTokenWorks(app, apiKey, atCutoff);
  await assertTokenWorks(app, apiKey, sameSecond);
  await assertTokenWorks(app, apiKey, later);
  assert.equal((await app.store.findUserByEmail(EMAIL))!.tokensValidFrom, second5);

  // An earlier cutoff never revives tokens.
  const older = await admin(app, [
    "token",
    "revoke-all",
    EMAIL,
    "--before",
    String(second5 - 5_000),
  ]);
  assert.match(older.out, /^Revoked 0 live token\(s\)/);
  assert.equal((await app.store.findUserByEmail(EMAIL))!.tokensValidFrom, second5);
  await assertTokenFails(app, apiKey, earlier);

  const future = await admin(app, ["token", "revoke-all", EMAIL, "--before", "1h"]);
  assert.equal(future.code, 0); // "1h" means an hour ago
  const refused = await admin(app, [
    "token",
    "revoke-all",
    EMAIL,
    "--before",
    "2027-01-01T00:00:00Z",
  ]);
  assert.equal(refused.code, 2);
  assert.match(refused.err, /Invalid --before "2027-01-01T00:00:00Z": it is in the future/);
  const garbage = await admin(app, ["token", "revoke-all", EMAIL, "--before", "yesterday"]);
  assert.equal(garbage.code, 2);
  assert.match(garbage.err, /Invalid --before "yesterday": expected an ISO 8601 time/);
});

Deno.test("[e2e] token revoke-all without --before covers the current millisecond; a later login works", async () => {
  const { app } = await setup();
  using _ = app;
  const apiKey = await createKey(app);
  const sameMs = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  const result = await admin(app, ["token", "revoke-all", EMAIL]);
  assert.equal(result.out, `Revoked 1 live token(s) of ${EMAIL} (issued until now)`);
  await assertTokenFails(app, apiKey, sameMs);
  // Still the same millisecond: the new token is dated just after the cutoff, so it works.
  const after = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  await assertTokenWorks(app, apiKey, after);
  const audit = (await app.store.listAudit()).find((entry) => entry.action === "tokens.revoked")!;
  assert.deepEqual(
    { actor: audit.actor, subject: audit.subject, revoked: audit.detail.tokens_revoked },
    { actor: "cli:tester", subject: `user:${EMAIL}`, revoked: 1 },
  );
});

Deno.test("revokeTokensIssuedBefore() is one write however many tokens the user holds", async () => {
  const { app, userId } = await setup();
  using _ = app;
  const apiKey = await createKey(app);
  const keyId = (await app.store.findApiKeyByHash(hashSecret(apiKey)))!.id;
  for (let i = 0; i < 50; i++) {
    await app.store.insertToken({
      tokenHash: hashSecret(`t${i}`),
      userId,
      apiKeyId: keyId,
      issuedAt: app.clock.now() - 1000 + i,
      expiresAt: app.clock.now() + HOUR,
      maxLiveTokens: 100,
    }, { audit: undefined });
  }
  // Rows changed on this connection: a SQLite counter; PostgreSQL has no per-connection one.
  const changes = app.sqlite?.countChanges();
  assert.equal(
    await app.store.revokeTokensOfUser(userId, {
      before: app.clock.now(),
      now: app.clock.now(),
      audit: undefined,
    }),
    50,
  );
  // The user's row, and the change record's one row for it (its trigger): no row per token.
  if (app.sqlite !== undefined) assert.equal(app.sqlite.countChanges() - changes!, 2);
  assert.equal(await app.store.countRows("tokens"), 50);
  assert.equal(
    await app.store.findTokenGrant({
      tokenHash: hashSecret("t0"),
      keyHash: hashSecret(apiKey),
      now: app.clock.now(),
    }),
    undefined,
  );
});

Deno.test("[e2e] user set-password and user disable apply the cutoff; re-enabling does not revive tokens", async () => {
  const { app } = await setup();
  using _ = app;
  const apiKey = await createKey(app);
  const first = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  app.clock.advance(1000);
  await admin(app, ["user", "disable", EMAIL]);
  await admin(app, ["user", "enable", EMAIL]);
  await assertTokenFails(app, apiKey, first);
  const second = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  await assertTokenWorks(app, apiKey, second);
  app.clock.advance(1000);
  const changed = await admin(app, ["user", "set-password", EMAIL], "brand new password");
  assert.match(changed.out, /1 live token\(s\) revoked/);
  await assertTokenFails(app, apiKey, second);
  await assertError(await requestToken(app, apiKey), 401, "invalid_credentials", "json");
});

Deno.test("[e2e] a password change during a login's password check refuses that login", async () => {
  let release!: () => void;
  let started!: () => void;
  const checking = new Promise<void>((resolve) => started = resolve);
  const gate = new Promise<void>((resolve) => release = resolve);
  const slowHasher: PasswordHasher = {
    hash: (password) => hasher.hash(password),
    async verify(hash, password) {
      started();
      await gate;
      return hasher.verify(hash, password);
    },
    close: () => {},
  };
  const { app, userId } = await setup({ hasher: slowHasher });
  using _ = app;
  const apiKey = await createKey(app);
  const pending = requestToken(app, apiKey);
  await checking;
  app.clock.advance(10);
  await app.store.updateUserPassword(userId, {
    passwordHash: await hasher.hash("other password"),
    now: app.clock.now(),
    audit: undefined,
  });
  app.clock.advance(10);
  release();
  const tokensBefore = await app.store.countRows("tokens");
  // The old password was right when it was read, but the user changed before the token was
  // stored: the uniform 401, and no token (a token dated before the new cutoff would be dead).
  await assertError(await pending, 401, "invalid_credentials", "json");
  assert.equal(await app.store.countRows("tokens"), tokensBefore);
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
