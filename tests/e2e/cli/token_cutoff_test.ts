/**
 * Token cutoffs end to end: `token revoke-all`, a password change and a disabled user end
 * the tokens issued before them, through the admin CLI on the database and clock the real
 * handler reads (keys: key_lifecycle_test.ts).
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { createPasswordHasher, type PasswordHasher } from "../../../src/passwords/passwords.ts";
import { assertError, issueToken } from "../../_helpers/requests.ts";
import {
  admin,
  assertTokenFails,
  assertTokenWorks,
  createKey,
  EMAIL,
  HOUR,
  PASSWORD,
  requestToken,
  setup,
} from "../../_helpers/lifecycle_app.ts";

const hasher = createPasswordHasher();

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
