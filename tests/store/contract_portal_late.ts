/**
 * The store contract of a portal write that reaches the store after its user's deletion (the
 * domain read the user before the deletion committed), run by both backends: it is refused with
 * {@link StoreConflict} and leaves nothing, no code, session or account row, no audit row naming
 * the address and no mail queued to it (nor, for a key, a key row). SQLite's foreign keys refuse some of these by
 * themselves; PostgreSQL's portal tables hold none, so each write checks its user first.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import { anonymizing, type ContractTest, entry, HOUR, NO_AUDIT, T0 } from "./_contract_fixtures.ts";

const EMAIL = "late@b.org";
const MAIL = { recipient: EMAIL, subject: "Verify", text: "Your code: ABCD-EFGH" };
const SESSION = hashSecret("late-session");

/** Each write keyed by the user (or its key), as the portal makes it. */
const LATE_WRITES: [
  string,
  (store: Store, ids: { userId: number; keyId: number }) => Promise<unknown>,
][] = [
  ["replacePortalCode", (store, { userId }) =>
    store.replacePortalCode(userId, {
      now: T0 + 2,
      code: { purpose: "reset", codeHash: hashSecret("r"), expiresAt: T0 + HOUR },
      mail: MAIL,
      passwordHash: "$argon2id$late",
      audit: entry("portal.reset_requested", `user:${EMAIL}`),
    })],
  ["addPortalCode", (store, { userId }) =>
    store.addPortalCode(userId, {
      now: T0 + 2,
      code: {
        purpose: "verify",
        codeHash: hashSecret("v"),
        expiresAt: T0 + HOUR,
        passwordHash: "$argon2id$late",
        network: "198.51.100.0/24",
      },
      mail: MAIL,
      keep: 3,
      keepPerNetwork: 3,
      audit: entry("portal.sign_up_repeated", `user:${EMAIL}`),
    })],
  ["insertPortalSession", (store, { userId }) =>
    store.insertPortalSession(SESSION, {
      now: T0 + 2,
      userId,
      expiresAt: T0 + HOUR,
      audit: entry("portal.signed_in", `user:${EMAIL}`),
    })],
  ["insertPortalAccount", (store, { userId }) =>
    store.insertPortalAccount(userId, {
      now: T0 + 2,
      audit: entry("portal.enrolled", `user:${EMAIL}`),
    })],
  ["updatePortalState", (store, { userId }) =>
    store.updatePortalState(userId, {
      now: T0 + 2,
      state: "active",
      mail: MAIL,
      audit: entry("portal.approved", `user:${EMAIL}`),
    })],
  ["updatePortalPassword", (store, { userId }) =>
    store.updatePortalPassword(userId, {
      now: T0 + 2,
      passwordHash: "$argon2id$late",
      mail: MAIL,
      audit: entry("portal.password_changed", `user:${EMAIL}`),
    })],
  ["insertApiKey", (store, { userId }) =>
    store.insertApiKey(
      { userId, keyHash: hashSecret("late-key"), prefix: "late", label: "" },
      { now: T0 + 2, maxLiveKeys: 20, audit: entry("key.created", "key:late", { user: EMAIL }) },
    )],
  ["rotateApiKey", (store, { userId, keyId }) =>
    store.rotateApiKey(keyId, {
      now: T0 + 2,
      successor: { userId, keyHash: hashSecret("late-key"), prefix: "late", label: "" },
      oldKeyExpiresAt: T0 + HOUR,
      audit: entry("key.created", "key:late", { user: EMAIL }),
    })],
  // Writes that name the user without being keyed by it: with `ofUser`.
  [
    "appendAudit",
    (store, { userId }) =>
      store.appendAudit(entry("portal.sign_in_failed", `user:${EMAIL}`), { ofUser: userId }),
  ],
  ["insertMail", (store, { userId }) =>
    store.insertMail(MAIL, {
      now: T0 + 2,
      audit: entry("portal.sign_up_repeated", `user:${EMAIL}`),
      ofUser: userId,
    })],
  ["recordPortalCodeAttempt", (store, { userId }) =>
    store.recordPortalCodeAttempt([1, 2], {
      now: T0 + 2,
      audit: entry("portal.code_failed", `user:${EMAIL}`),
      ofUser: userId,
    })],
  ["updateApiKeyLabel", (store, { keyId }) =>
    store.updateApiKeyLabel(keyId, {
      now: T0 + 2,
      label: "late",
      audit: entry("portal.key_labelled", `user:${EMAIL}`),
    })],
];

/** Registers the tests with the contract's `test`. */
export function registerPortalLateWriteTests(test: ContractTest): void {
  for (const [method, write] of LATE_WRITES) {
    test(`${method}() for a deleted user is refused and leaves nothing`, async ({ store }) => {
      const user = await store.insertUser(
        { email: EMAIL, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
        { now: T0, audit: entry("user.added", `user:${EMAIL}`) },
      );
      const key = await store.insertApiKey(
        { userId: user.id, keyHash: hashSecret("k"), prefix: "k", label: "" },
        { now: T0, ...NO_AUDIT },
      );
      const other = await store.insertUser(
        { email: "other@b.org", passwordHash: "$argon2id$o", tokenTimeoutSeconds: null },
        { now: T0, ...NO_AUDIT },
      );
      await store.deleteUser(user.id, {
        now: T0 + 1,
        ...anonymizing(user.id),
        audit: entry("user.deleted", anonymizing(user.id).anonymousRef),
      });
      const audit = await store.listAudit();
      const mail = await store.countMail();

      await assert.rejects(write(store, { userId: user.id, keyId: key.id }), StoreConflict);

      assert.deepEqual(await store.listAudit(), audit, "no audit row");
      assert.deepEqual(
        (await store.listAudit()).filter((row) => JSON.stringify(row).includes(EMAIL)),
        [],
      );
      assert.deepEqual(await store.countMail(), mail, "no mail queued");
      for (const purpose of ["verify", "reset", "email"] as const) {
        assert.deepEqual(await store.findPortalCodes(user.id, purpose, T0 + 3), [], purpose);
      }
      assert.equal(await store.findPortalAccount(user.id), undefined);
      assert.equal(await store.findUserById(user.id), undefined);
      assert.equal(await store.findApiKeyByHash(hashSecret("late-key")), undefined, "no key");
      // No session row under that digest, not even one its (gone) user cannot be read through:
      // another user's session can take the digest.
      await store.insertPortalSession(SESSION, {
        now: T0 + 3,
        userId: other.id,
        expiresAt: T0 + HOUR,
        ...NO_AUDIT,
      });
      assert.equal((await store.findPortalSessionUser(SESSION, T0 + 4))?.user.id, other.id);
    });
  }

  test("appendAudit() and insertMail() with ofUser write while the user exists", async ({ store }) => {
    const user = await store.insertUser(
      { email: EMAIL, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
      { now: T0, ...NO_AUDIT },
    );
    await store.appendAudit(entry("portal.sign_in_failed", `user:${EMAIL}`), { ofUser: user.id });
    await store.insertMail(MAIL, {
      now: T0 + 1,
      audit: entry("portal.sign_up_repeated", `user:${EMAIL}`),
      ofUser: user.id,
    });
    assert.deepEqual((await store.listAudit()).map((row) => [row.action, row.subject]), [
      ["portal.sign_in_failed", `user:${EMAIL}`],
      ["portal.sign_up_repeated", `user:${EMAIL}`],
    ]);
    assert.equal((await store.countMail()).pending, 1);
  });
}
