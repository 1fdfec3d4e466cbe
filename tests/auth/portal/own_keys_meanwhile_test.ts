/**
 * A key write whose user is deleted, or whose key is revoked or rotated, after the domain read
 * it and before the write reaches the store (held open by a store wrapper that makes that
 * change just before the write): `createOwnKey`, `rotateOwnKey` and `rotateKey` answer
 * `not_found` or `conflict` (never a store error, a 500) and write no key. Both backends
 * (`KEYGATE_TEST_STORE`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { rotateKey } from "../../../src/auth/keys.ts";
import { createOwnKey, rotateOwnKey } from "../../../src/auth/portal/own_keys.ts";
import { AuthError } from "../../../src/auth/errors.ts";
import type { ChangeDeps } from "../../../src/auth/changes.ts";
import { hashSecret } from "../../../src/auth/credentials.ts";
import type { Store } from "../../../src/store/store.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { openTestStore, TEST_STORE_NAME } from "../../_helpers/store.ts";
import { changingBefore } from "../../_helpers/store_before.ts";

const EMAIL = "keys@example.org";

function deleting(userId: number) {
  return (store: Store) =>
    store.deleteUser(userId, {
      now: 1,
      anonymousRef: `user:deleted:keys${userId}`,
      anonymousActor: `portal:user:${userId}`,
      audit: { at: 1, actor: "cli:test", action: "user.deleted", subject: "x", detail: {} },
    });
}

async function rig() {
  const db = await openTestStore();
  const clock = createFakeClock();
  const user = await db.store.insertUser(
    { email: EMAIL, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    { now: clock.now(), audit: undefined },
  );
  const key = await db.store.insertApiKey(
    { userId: user.id, keyHash: hashSecret("first"), prefix: "first", label: "" },
    { now: clock.now(), audit: undefined },
  );
  const deps = (method: keyof Store, before: (store: Store) => Promise<unknown>): ChangeDeps => ({
    store: changingBefore(db.store, method, before),
    clock,
    actor: `portal:user:${user.id}`,
  });
  return { db, user, key, deps };
}

async function codeOf(promise: Promise<unknown>): Promise<[string, string]> {
  const error = await promise.then(() => undefined, (error) => error);
  assert.ok(error instanceof AuthError, String(error));
  return [error.code, error.message];
}

const options = { sanitizeResources: false, sanitizeOps: false };

Deno.test({
  name: `[${TEST_STORE_NAME}] createOwnKey() for a user deleted meanwhile is not_found`,
  ...options,
  async fn() {
    const { db, user, deps } = await rig();
    await using _ = db;
    const got = await codeOf(createOwnKey(deps("insertApiKey", deleting(user.id)), user, "x"));
    assert.deepEqual(got, ["not_found", `No user ${user.id}`]);
    assert.deepEqual(await db.store.listApiKeys(), []);
    assert.deepEqual((await db.store.listAudit()).map((row) => row.action), ["user.deleted"]);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] rotateOwnKey() for a user deleted meanwhile is not_found`,
  ...options,
  async fn() {
    const { db, user, key, deps } = await rig();
    await using _ = db;
    const got = await codeOf(rotateOwnKey(deps("rotateApiKey", deleting(user.id)), user, key.id));
    assert.deepEqual(got, ["not_found", `No API key ${key.id} of yours`]);
    assert.deepEqual(await db.store.listApiKeys(), []);
    assert.deepEqual((await db.store.listAudit()).map((row) => row.action), ["user.deleted"]);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] rotateKey() of a key revoked meanwhile is conflict`,
  ...options,
  async fn() {
    const { db, key, deps } = await rig();
    await using _ = db;
    const revoking = (store: Store) => store.revokeApiKey(key.id, { now: 2, audit: undefined });
    const got = await codeOf(rotateKey(deps("rotateApiKey", revoking), key, 60));
    assert.deepEqual(got, [
      "conflict",
      `Cannot rotate API key ${key.id}: it was rotated or revoked meanwhile`,
    ]);
    const keys = await db.store.listApiKeys();
    assert.deepEqual(keys.map((row) => [row.id, row.revokedAt, row.replacedBy]), [
      [key.id, 2, null],
    ]);
    assert.deepEqual(await db.store.listAudit(), []);
  },
});

Deno.test({
  name: `[${TEST_STORE_NAME}] rotateKey() of a key rotated meanwhile is conflict`,
  ...options,
  async fn() {
    const { db, key, deps } = await rig();
    await using _ = db;
    const rotating = (store: Store) =>
      rotateKey({ store, clock: createFakeClock(), actor: "x" }, key);
    const got = await codeOf(rotateKey(deps("rotateApiKey", rotating), key, 60));
    assert.equal(got[0], "conflict");
    const keys = await db.store.listApiKeys();
    assert.equal(keys.length, 2, "one successor only");
    assert.equal(keys[0].replacedBy, keys[1].id);
  },
});
