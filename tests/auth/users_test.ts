import assert from "node:assert/strict";
import { AuthError } from "../../src/auth/errors.ts";
import {
  addUser,
  changeUserPassword,
  revokeUserTokens,
  setUserDisabled,
} from "../../src/auth/users.ts";
import { openDomainFixture } from "./_domain.ts";

Deno.test("addUser() stores the NFC, lower-case e-mail and an argon2id hash, audited once", async () => {
  await using f = await openDomainFixture();
  const user = await addUser(f.deps, {
    email: "Jose\u0301@Example.ORG",
    password: "s3cret pw",
    tokenTimeoutSeconds: 7200,
  });
  assert.equal(user.email, "jos\u00e9@example.org");
  assert.equal(user.tokenTimeoutSeconds, 7200);
  const stored = (await f.test.store.findUserByEmail("jos\u00e9@example.org"))!;
  assert.equal(stored.id, user.id);
  assert.match(stored.passwordHash, /^\$argon2id\$/);
  assert.equal(await f.verify(stored.passwordHash, "s3cret pw"), true);
  assert.deepEqual(f.noted.map((e) => [e.actor, e.action, e.subject, e.detail]), [
    ["cli:tester", "user.added", "user:jos\u00e9@example.org", { timeout: "2h" }],
  ]);
  const audit = await f.test.store.listAudit();
  assert.deepEqual(audit.map((row) => row.action), ["user.added"]);
});

Deno.test("addUser() refuses an address taken in another case or normal form, before hashing", async () => {
  await using f = await openDomainFixture();
  await f.addUser("jos\u00e9@example.org");
  const before = f.hashes();
  await assert.rejects(
    () =>
      addUser(f.deps, {
        email: "JOSE\u0301@example.org",
        password: "pw",
        tokenTimeoutSeconds: null,
      }),
    (error: unknown) =>
      error instanceof AuthError && error.code === "conflict" &&
      error.message === 'User "jos\u00e9@example.org" already exists',
  );
  assert.equal(f.hashes(), before);
  assert.equal(await f.test.store.countRows("users"), 1);
});

Deno.test("addUser() refuses a bad address or password with invalid_request and writes nothing", async () => {
  await using f = await openDomainFixture();
  for (
    const [email, password] of [["not-an-address", "pw"], ["a@b.org", ""], [
      "a@b.org",
      "x".repeat(1025),
    ]]
  ) {
    await assert.rejects(
      () => addUser(f.deps, { email, password, tokenTimeoutSeconds: null }),
      (error: unknown) => error instanceof AuthError && error.code === "invalid_request",
    );
  }
  assert.equal(f.hashes(), 0);
  assert.equal(await f.test.store.countRows("users"), 0);
  assert.deepEqual(await f.test.store.listAudit(), []);
});

Deno.test("changeUserPassword() hashes the new password and ends the user's live tokens", async () => {
  await using f = await openDomainFixture();
  const user = await f.addUser("ann@example.org", "old password");
  const key = await f.addKey(user);
  await f.addToken(user, key);
  await f.addToken(user, key);
  f.clock.advance(1000);
  assert.equal(await changeUserPassword(f.deps, user, "new password"), 2);
  const stored = (await f.test.store.findUserById(user.id))!;
  assert.equal(await f.verify(stored.passwordHash, "new password"), true);
  assert.equal(await f.verify(stored.passwordHash, "old password"), false);
  assert.equal(await f.test.store.countLiveTokens(f.clock.now()), 0);
  assert.deepEqual(f.noted.at(-1)?.detail, { tokens_revoked: 2 });
  await assert.rejects(
    () => changeUserPassword(f.deps, user, ""),
    (error: unknown) => error instanceof AuthError && error.code === "invalid_request",
  );
});

Deno.test("setUserDisabled() ends tokens; revokeUserTokens() refuses a time in the future", async () => {
  await using f = await openDomainFixture();
  const user = await f.addUser("bob@example.org");
  const key = await f.addKey(user);
  await f.addToken(user, key);
  f.clock.advance(1000);
  assert.equal(await setUserDisabled(f.deps, user, true), 1);
  assert.equal((await f.test.store.findUserById(user.id))!.disabled, true);
  assert.equal(await setUserDisabled(f.deps, user, false), 0);
  await assert.rejects(
    () => revokeUserTokens(f.deps, user, f.clock.now() + 1),
    (error: unknown) => error instanceof AuthError && error.code === "invalid_request",
  );
  assert.deepEqual(f.noted.map((e) => e.action), [
    "user.added",
    "key.created",
    "user.disabled",
    "user.enabled",
  ]);
});
