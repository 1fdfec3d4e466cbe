import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { AuthError } from "../../src/auth/errors.ts";
import { createKey, revokeKey, rotateKey, setKeyDisabled } from "../../src/auth/keys.ts";
import { MAX_ROTATION_CHAIN } from "../../src/store/store_limits.ts";
import { openDomainFixture } from "./_domain.ts";

Deno.test("createKey() stores only the key's digest and returns the key once, audited", async () => {
  await using f = await openDomainFixture();
  const user = await f.addUser("ann@example.org");
  const { key, apiKey } = await createKey(f.deps, user, { label: "ci", introspect: true });
  const found = (await f.test.store.findApiKeyByHash(hashSecret(apiKey)))!;
  assert.equal(found.id, key.id);
  assert.equal(found.userId, user.id);
  assert.equal(found.label, "ci");
  assert.equal(found.introspect, true);
  assert.equal(apiKey.startsWith(found.prefix), true);
  assert.deepEqual(f.noted.at(-1)?.action, "key.created");
  assert.equal(JSON.stringify(await f.test.store.listAudit()).includes(apiKey), false);
});

Deno.test("createKey() refuses a label too long or with a control character", async () => {
  await using f = await openDomainFixture();
  const user = await f.addUser("ann@example.org");
  for (const label of ["x".repeat(201), "a\u0007b"]) {
    await assert.rejects(
      () => createKey(f.deps, user, { label }),
      (error: unknown) => error instanceof AuthError && error.code === "invalid_request",
    );
  }
  assert.equal(await f.test.store.countRows("api_keys"), 0);
});

Deno.test("rotateKey() issues a successor; the old key works until the grace ends", async () => {
  await using f = await openDomainFixture();
  const user = await f.addUser("ann@example.org");
  const { key: old, apiKey: oldKey } = await createKey(f.deps, user);
  const rotated = await rotateKey(f.deps, old, 3600);
  assert.equal(rotated.oldKeyUntil, f.clock.now() + 3600_000);
  assert.notEqual(rotated.key.id, old.id);
  assert.ok(await f.test.store.findKeyHolder(hashSecret(rotated.apiKey), f.clock.now()));
  assert.ok(await f.test.store.findKeyHolder(hashSecret(oldKey), f.clock.now() + 3599_000));
  assert.equal(
    await f.test.store.findKeyHolder(hashSecret(oldKey), f.clock.now() + 3600_000),
    undefined,
  );
  // A rotated key is not rotated twice.
  const again = (await f.test.store.findApiKeyById(old.id))!;
  await assert.rejects(() => rotateKey(f.deps, again, 60), AuthError);
});

Deno.test("rotateKey() refuses a rotation that would put a working key more than MAX_ROTATION_CHAIN rotations behind; ended keys do not count", async () => {
  await using f = await openDomainFixture();
  const user = await f.addUser("ann@example.org");
  let { key } = await createKey(f.deps, user);
  // Rotations with no grace: the keys behind end at once, and any number of them may be made.
  for (let i = 0; i < MAX_ROTATION_CHAIN + 2; i++) ({ key } = await rotateKey(f.deps, key, 0));
  // Then with a grace: each key behind keeps working.
  const first = key;
  for (let i = 0; i < MAX_ROTATION_CHAIN; i++) ({ key } = await rotateKey(f.deps, key, 3600));
  // The walk of every lease reaches the last key from the first, MAX_ROTATION_CHAIN behind it.
  const { store } = f.test;
  const now = f.clock.now();
  await store.putLimit(
    { scope: "key", subjectId: key.id, kind: "quota", max: 5, period: "none" },
    { now, audit: [] },
  );
  const [[slice]] = await store.leaseLimits([
    { apiKeyId: first.id, userId: user.id, now, want: () => 2 },
  ]);
  assert.deepEqual([slice.subjectId, slice.granted, slice.used], [key.id, 2, 2]);
  const before = (await f.test.store.listApiKeys(user.id)).length;
  await assert.rejects(
    () => rotateKey(f.deps, key, 3600),
    (error: AuthError) =>
      error.code === "conflict" &&
      error.message ===
        `Cannot rotate API key ${key.id}: a key ${MAX_ROTATION_CHAIN} rotations before it still ` +
          "works; rotate it once that key's grace period ends, or revoke that key",
  );
  assert.equal((await f.test.store.listApiKeys(user.id)).length, before);
  // Once the first of them has ended, the rotation goes through.
  await revokeKey(f.deps, (await f.test.store.findApiKeyById(first.id))!);
  await rotateKey(f.deps, (await f.test.store.findApiKeyById(key.id))!, 3600);
  assert.equal((await f.test.store.listApiKeys(user.id)).length, before + 1);
});

Deno.test("setKeyDisabled() says whether it changed; revokeKey() ends tokens, once", async () => {
  await using f = await openDomainFixture();
  const user = await f.addUser("ann@example.org");
  const key = await f.addKey(user);
  assert.equal(await setKeyDisabled(f.deps, key, true), true);
  const disabled = (await f.test.store.findApiKeyById(key.id))!;
  assert.equal(await setKeyDisabled(f.deps, disabled, true), false);
  assert.equal(await setKeyDisabled(f.deps, disabled, false), true);
  await f.addToken(user, key);
  assert.equal(await revokeKey(f.deps, key), 1);
  const revoked = (await f.test.store.findApiKeyById(key.id))!;
  assert.notEqual(revoked.revokedAt, null);
  assert.equal(await revokeKey(f.deps, revoked), undefined);
  await assert.rejects(
    () => setKeyDisabled(f.deps, revoked, false),
    (error: unknown) => error instanceof AuthError && error.code === "conflict",
  );
  assert.equal(await f.test.store.countLiveTokens(f.clock.now()), 0);
});
