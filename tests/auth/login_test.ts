import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { AuthError } from "../../src/auth/errors.ts";
import { createKey } from "../../src/auth/keys.ts";
import { createLogin, toCredentials } from "../../src/auth/login.ts";
import { createThrottle, type ThrottleRules } from "../../src/auth/throttle.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { type DomainFixture, openDomainFixture } from "./_domain.ts";

const hasher = createPasswordHasher({ workers: 1 });
const RULE = { threshold: 2, baseDelayMs: 60_000, maxDelayMs: 600_000, windowMs: 3_600_000 };
const RULES: ThrottleRules = { account: RULE, client: { ...RULE, threshold: 100 } };

async function setup(f: DomainFixture) {
  const user = await f.addUser("ann@example.org", "correct horse");
  const { key, apiKey } = await createKey(f.deps, user);
  const store = f.test.store;
  // A moment later, as in life: a token issued in the user's first millisecond is not valid.
  f.clock.advance(1000);
  const login = createLogin({
    store,
    hasher,
    clock: f.clock,
    throttle: createThrottle({ store, clock: f.clock, rules: RULES }),
    defaultTimeoutSeconds: 600,
  });
  const attempt = (email: string, password: string, key = apiKey) =>
    login({
      credentials: toCredentials({ email, password, apiKey: key }, undefined),
      clientAddress: "192.0.2.9",
    });
  return { user, key, apiKey, attempt };
}

function isFailure(code: string, detail?: string) {
  return (error: unknown) =>
    error instanceof AuthError && error.code === code &&
    (detail === undefined || error.detail === detail);
}

Deno.test("login issues a token valid for the default lifetime, audited with its id", async () => {
  await using f = await openDomainFixture();
  const { user, key, attempt } = await setup(f);
  const issued = await attempt("ANN@example.org", "correct horse");
  assert.equal(issued.userId, user.id);
  assert.equal(issued.apiKeyId, key.id);
  const status = (await f.test.store.findTokenStatus(hashSecret(issued.token), f.clock.now()))!;
  assert.equal(status.live, true);
  assert.equal(status.expiresAt, f.clock.now() + 600_000);
  const [entry] = (await f.test.store.listAudit()).filter((r) => r.action === "token.issued");
  assert.equal(entry.detail.token_id, issued.tokenId);
  assert.equal(JSON.stringify(entry).includes(issued.token), false);
});

Deno.test("login fails alike for a wrong password, an unknown user and a foreign key", async () => {
  await using f = await openDomainFixture();
  const { attempt } = await setup(f);
  const bob = await f.addUser("bob@example.org", "bob password");
  const { apiKey: bobKey } = await createKey(f.deps, bob);
  await assert.rejects(
    () => attempt("ann@example.org", "wrong"),
    isFailure("invalid_credentials", "wrong_password"),
  );
  await assert.rejects(
    () => attempt("nobody@example.org", "correct horse"),
    isFailure("invalid_credentials", "unknown_user"),
  );
  await assert.rejects(
    () => attempt("ann@example.org", "correct horse", bobKey),
    isFailure("invalid_credentials"),
  );
  assert.equal(await f.test.store.countRows("tokens"), 0);
  const failed = (await f.test.store.listAudit()).filter((r) => r.action === "login.failed");
  assert.equal(failed.length, 3);
});

Deno.test("login is throttled after the account rule's threshold, until the block ends", async () => {
  await using f = await openDomainFixture();
  const { attempt } = await setup(f);
  for (let i = 0; i < 2; i++) {
    await assert.rejects(
      () => attempt("ann@example.org", "wrong"),
      isFailure("invalid_credentials"),
    );
  }
  // Blocked: even the right password is refused, before it is checked.
  await assert.rejects(
    () => attempt("ann@example.org", "correct horse"),
    (error: unknown) =>
      isFailure("too_many_attempts")(error) && (error as AuthError).retryAfterSeconds! > 0,
  );
  f.clock.advance(60_000);
  assert.ok((await attempt("ann@example.org", "correct horse")).token);
});
