/**
 * The store contract's portal tests: accounts and their states, one-time codes, sessions and
 * the mail outbox written in the same transaction as the change that causes it; the outbox itself
 * is in contract_portal_mail.ts. One register function per topic, each called by contract.ts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import {
  anonymizing,
  type ContractTest,
  grantOf,
  HOUR,
  issue,
  NO_AUDIT,
  seed,
  T0,
} from "./_contract_fixtures.ts";

export const MAIL = { recipient: "new@b.org", subject: "Verify", text: "Your code: ABCD-EFGH" };

async function signUp(store: Store, email = "new@b.org") {
  return await store.insertPortalUser(
    { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    {
      now: T0,
      state: "pending_verification",
      code: { purpose: "verify", codeHash: hashSecret("c1"), expiresAt: T0 + HOUR },
      mail: MAIL,
      audit: {
        at: T0,
        actor: "portal",
        action: "portal.signed_up",
        subject: `user:${email}`,
        detail: {},
      },
    },
  );
}

/** Sign-ups: the account with its code, mail and audit row; verification; an operator's disable. */
export function registerPortalSignUpTests(test: ContractTest): void {
  test("insertPortalUser() adds a disabled user, its account, code, mail and audit row", async ({ store }) => {
    const user = await signUp(store);
    assert.equal(user.disabled, true);
    assert.deepEqual(await store.findPortalAccount(user.id), {
      userId: user.id,
      state: "pending_verification",
      createdAt: T0,
      userHeld: true,
    });
    const code = await store.findPortalCode(user.id, "verify", T0);
    assert.deepEqual(code?.codeHash, new Uint8Array(hashSecret("c1")));
    assert.equal(code?.attempts, 0);
    assert.equal(await store.findPortalCode(user.id, "verify", T0 + HOUR), undefined);
    assert.equal((await store.countMail()).pending, 1);
    assert.equal(
      (await store.listAudit()).filter((r) => r.action === "portal.signed_up").length,
      1,
    );
    await assert.rejects(signUp(store), StoreConflict);
    assert.equal((await store.countMail()).pending, 1, "a refused sign-up queues nothing");
  });

  test("usePortalCode() spends a code once, activates the account and enables the user", async ({ store }) => {
    const user = await signUp(store);
    const code = (await store.findPortalCode(user.id, "verify", T0))!;
    assert.equal(await store.recordPortalCodeAttempt(code.id, { now: T0, ...NO_AUDIT }), 1);
    assert.equal(
      await store.usePortalCode(code.id, { now: T0 + 1, state: "active", ...NO_AUDIT }),
      0,
    );
    assert.equal((await store.findPortalAccount(user.id))?.state, "active");
    assert.equal((await store.findUserById(user.id))?.disabled, false);
    assert.equal(await store.findPortalCode(user.id, "verify", T0 + 2), undefined);
    await assert.rejects(
      store.usePortalCode(code.id, { now: T0 + 2, state: "active", ...NO_AUDIT }),
      StoreConflict,
    );
  });

  test("usePortalCode() and updatePortalState() never enable a user an operator disabled", async ({ store }) => {
    const disable = { disabled: true, now: T0 + 1, ...NO_AUDIT };
    // Disabled by an operator while waiting for verification: activation leaves it disabled.
    const user = await signUp(store);
    await store.updateUserDisabled(user.id, disable);
    assert.equal((await store.findPortalAccount(user.id))?.userHeld, false, "the hold ends");
    const code = (await store.findPortalCode(user.id, "verify", T0))!;
    await store.usePortalCode(code.id, { now: T0 + 2, state: "active", ...NO_AUDIT });
    assert.equal((await store.findPortalAccount(user.id))?.state, "active");
    assert.equal((await store.findUserById(user.id))?.disabled, true, "the operator's disable");
    // Waiting for approval: the operator's approval leaves its own disable too.
    const other = await signUp(store, "other@b.org");
    await store.updatePortalState(other.id, {
      now: T0 + 1,
      state: "pending_approval",
      ...NO_AUDIT,
    });
    assert.equal((await store.findPortalAccount(other.id))?.userHeld, true);
    await store.updateUserDisabled(other.id, disable);
    await store.updatePortalState(other.id, { now: T0 + 2, state: "active", ...NO_AUDIT });
    assert.equal((await store.findUserById(other.id))?.disabled, true);
    // An operator's enable ends the hold too; the user stays enabled through activation.
    const third = await signUp(store, "third@b.org");
    await store.updateUserDisabled(third.id, { ...disable, disabled: false });
    await store.updatePortalState(third.id, { now: T0 + 2, state: "active", ...NO_AUDIT });
    assert.equal((await store.findUserById(third.id))?.disabled, false);
    assert.equal((await store.findPortalAccount(third.id))?.userHeld, false);
  });
}

/** The janitor's deletion of old unverified sign-ups, with their keys, counters and codes. */
export function registerPortalUnverifiedDeletionTests(test: ContractTest): void {
  test("deleteUnverifiedPortalUsers() deletes only old unverified sign-ups, with their rows", async ({ store }) => {
    const old = await signUp(store, "old@b.org");
    // An operator's key on the sign-up, with a login-failure counter: both go, as with deleteUser.
    const key = await store.insertApiKey(
      { userId: old.id, keyHash: hashSecret("ko"), prefix: "ko", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    await store.recordLoginFailures([`key:${key.id}`], {
      now: T0,
      ...NO_AUDIT,
      next: (_previous, subject) => ({
        subject,
        failures: 1,
        lastFailureAt: T0,
        blockedUntil: 0,
        forgetAt: T0 + HOUR,
      }),
    });
    const verified = await signUp(store, "verified@b.org");
    await store.updatePortalState(verified.id, { now: T0, state: "active", ...NO_AUDIT });
    const { user: operators } = await seed(store);
    const epoch = store.readGrantEpoch();
    const asked: number[] = [];
    const anonymize = (userId: number) => {
      asked.push(userId);
      return anonymizing(userId, `user:deleted:unverified${userId}`);
    };
    assert.deepEqual(
      await store.deleteUnverifiedPortalUsers(T0, {
        now: T0 + HOUR,
        limit: 10,
        anonymize,
        ...NO_AUDIT,
      }),
      [],
      "created at T0: not before T0",
    );
    const ref = `user:deleted:unverified${old.id}`;
    const gone = await store.deleteUnverifiedPortalUsers(T0 + 1, {
      now: T0 + HOUR,
      limit: 10,
      anonymize,
      audit: (deleted) =>
        deleted.map((user) => ({
          at: T0 + HOUR,
          actor: "janitor",
          action: "portal.unverified_deleted",
          subject: user.anonymousRef,
          detail: { audit_rows: user.auditRows },
        })),
    });
    assert.deepEqual(gone, [
      { userId: old.id, anonymousRef: ref, apiKeys: 1, tokens: 0, auditRows: 1 },
    ]);
    assert.deepEqual(asked, [old.id]);
    assert.equal(await store.findUserById(old.id), undefined);
    assert.equal(await store.findApiKeyById(key.id), undefined);
    assert.deepEqual(await store.listLoginFailures(T0 + 1), [], "its key's counter went too");
    assert.equal(await store.findPortalAccount(old.id), undefined);
    assert.equal(await store.findPortalCode(old.id, "verify", T0), undefined);
    assert.notEqual(await store.findUserById(verified.id), undefined);
    assert.notEqual(await store.findUserById(operators.id), undefined);
    assert.notEqual(store.readGrantEpoch(), epoch);
    // The sign-up's own row took the id, in the same transaction as the delete's entry.
    assert.deepEqual(
      (await store.listAudit()).map((r) => [r.action, r.subject, r.detail]),
      [
        ["portal.signed_up", ref, {}],
        ["portal.signed_up", "user:verified@b.org", {}],
        ["portal.unverified_deleted", ref, { audit_rows: 1 }],
      ],
    );
  });
}

/** Codes that change the account: a reset's new password, a confirmed new e-mail. */
export function registerPortalCodeTests(test: ContractTest): void {
  test("usePortalCode() with a password ends every token and portal session, and mails", async ({ store }) => {
    const user = await signUp(store);
    await store.updatePortalState(user.id, { now: T0, state: "active", ...NO_AUDIT });
    const key = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k1"), prefix: "k1", label: "" },
      { now: T0, ...NO_AUDIT },
    );
    await issue(store, { userId: user.id, apiKeyId: key.id }, "t1");
    await store.insertPortalSession(hashSecret("s1"), {
      now: T0,
      userId: user.id,
      expiresAt: T0 + HOUR,
      ...NO_AUDIT,
    });
    await store.replacePortalCode(user.id, {
      now: T0 + 1,
      code: { purpose: "reset", codeHash: hashSecret("r1"), expiresAt: T0 + HOUR },
      mail: MAIL,
      ...NO_AUDIT,
    });
    await store.replacePortalCode(user.id, {
      now: T0 + 2,
      code: { purpose: "reset", codeHash: hashSecret("r2"), expiresAt: T0 + HOUR },
      mail: MAIL,
      ...NO_AUDIT,
    });
    const code = (await store.findPortalCode(user.id, "reset", T0 + 3))!;
    assert.deepEqual(
      code.codeHash,
      new Uint8Array(hashSecret("r2")),
      "a new code ends the older ones",
    );
    const ended = await store.usePortalCode(code.id, {
      now: T0 + 10,
      passwordHash: "$argon2id$new",
      mail: MAIL,
      ...NO_AUDIT,
    });
    assert.equal(ended, 1);
    assert.equal((await store.findUserById(user.id))?.passwordHash, "$argon2id$new");
    assert.equal(
      await store.findTokenGrant({
        tokenHash: hashSecret("t1"),
        keyHash: hashSecret("k1"),
        now: T0 + 11,
      }),
      undefined,
    );
    assert.equal(await store.findPortalSessionUser(hashSecret("s1"), T0 + 11), undefined);
    assert.equal((await store.countMail()).pending, 4);
  });

  test("usePortalCode() with changeEmail gives the user the code's address, once and if free", async ({ store }) => {
    const user = await signUp(store);
    await store.updatePortalState(user.id, { now: T0, state: "active", ...NO_AUDIT });
    const epoch = store.readGrantEpoch();
    const email = { purpose: "email" as const, expiresAt: T0 + HOUR };
    await store.replacePortalCode(user.id, {
      now: T0 + 1,
      code: { ...email, codeHash: hashSecret("e1"), newEmail: "moved@b.org" },
      mail: { ...MAIL, recipient: "moved@b.org" },
      ...NO_AUDIT,
    });
    const code = (await store.findPortalCode(user.id, "email", T0 + 2))!;
    assert.equal(code.newEmail, "moved@b.org");
    assert.equal(await store.findPortalCode(user.id, "reset", T0 + 2), undefined);
    await store.usePortalCode(code.id, { now: T0 + 3, changeEmail: true, mail: MAIL, ...NO_AUDIT });
    assert.equal((await store.findUserById(user.id))?.email, "moved@b.org");
    assert.notEqual(store.readGrantEpoch(), epoch, "grants carry the e-mail");
    assert.equal(await store.findPortalCode(user.id, "email", T0 + 4), undefined);

    // Taken meanwhile: nothing changes, the code stays unused.
    await signUp(store, "taken@b.org");
    await store.replacePortalCode(user.id, {
      now: T0 + 5,
      code: { ...email, codeHash: hashSecret("e2"), newEmail: "taken@b.org" },
      mail: MAIL,
      ...NO_AUDIT,
    });
    const second = (await store.findPortalCode(user.id, "email", T0 + 6))!;
    const queued = (await store.countMail()).pending;
    await assert.rejects(
      store.usePortalCode(second.id, { now: T0 + 7, changeEmail: true, mail: MAIL, ...NO_AUDIT }),
      StoreConflict,
    );
    assert.equal((await store.findUserById(user.id))?.email, "moved@b.org");
    assert.equal((await store.findPortalCode(user.id, "email", T0 + 8))?.id, second.id);
    assert.equal((await store.countMail()).pending, queued, "no mail from a refused change");
  });
}

/** Portal sessions: expiry, sign-out, and the changes that end them. */
export function registerPortalSessionTests(test: ContractTest): void {
  test("portal sessions expire, end on sign-out and go with their user", async ({ store }) => {
    const user = await signUp(store);
    const session = { now: T0, userId: user.id, expiresAt: T0 + HOUR, ...NO_AUDIT };
    await store.insertPortalSession(hashSecret("s1"), session);
    await store.insertPortalSession(hashSecret("s2"), session);
    assert.deepEqual((await store.findPortalSessionUser(hashSecret("s1"), T0 + 1))?.session, {
      userId: user.id,
      createdAt: T0,
      expiresAt: T0 + HOUR,
    });
    assert.equal(await store.findPortalSessionUser(hashSecret("s1"), T0 + HOUR), undefined);
    assert.equal(await store.deletePortalSession(hashSecret("s1"), { now: T0, ...NO_AUDIT }), true);
    assert.equal(
      await store.deletePortalSession(hashSecret("s1"), { now: T0, ...NO_AUDIT }),
      false,
    );
    await store.deleteUser(user.id, { now: T0, ...anonymizing(user.id), ...NO_AUDIT });
    assert.equal(await store.findPortalSessionUser(hashSecret("s2"), T0 + 1), undefined);
    assert.equal(await store.findPortalAccount(user.id), undefined);
  });

  test("a password change, a disable and a revoke-all end the user's portal sessions", async ({ store }) => {
    const user = await signUp(store);
    const other = await signUp(store, "other@b.org");
    const session = { now: T0, userId: user.id, expiresAt: T0 + HOUR, ...NO_AUDIT };
    const live = async (id: string) =>
      (await store.findPortalSessionUser(hashSecret(id), T0 + 1)) !== undefined;
    const open = async (...ids: string[]) => {
      for (const id of ids) await store.insertPortalSession(hashSecret(id), session);
    };
    await store.insertPortalSession(hashSecret("o1"), { ...session, userId: other.id });
    await open("s1", "s2");
    // A change made in a session keeps that one session only.
    await store.updateUserPassword(user.id, {
      passwordHash: "$argon2id$y",
      now: T0 + 1,
      keepPortalSession: hashSecret("s1"),
      ...NO_AUDIT,
    });
    assert.deepEqual([await live("s1"), await live("s2")], [true, false]);
    await store.updateUserPassword(user.id, {
      passwordHash: "$argon2id$z",
      now: T0 + 2,
      ...NO_AUDIT,
    });
    assert.equal(await live("s1"), false, "an operator's set-password ends every session");
    await open("s3");
    await store.revokeTokensOfUser(user.id, { now: T0 + 3, ...NO_AUDIT });
    assert.equal(await live("s3"), false, "revoke-all");
    await open("s4");
    await store.revokeTokensOfUser(user.id, { now: T0 + 4, before: T0 + 4, ...NO_AUDIT });
    assert.equal(await live("s4"), false, "revoke-all --before");
    await open("s5");
    await store.updateUserDisabled(user.id, { disabled: false, now: T0 + 5, ...NO_AUDIT });
    assert.equal(await live("s5"), true, "enabling ends nothing");
    await store.updateUserDisabled(user.id, { disabled: true, now: T0 + 6, ...NO_AUDIT });
    assert.equal(await live("s5"), false, "disable");
    assert.equal(await live("o1"), true, "another user's session stays");
  });
}

/** A developer's keys: the live-key cap under racing inserts, relabelling. */
export function registerPortalKeyTests(test: ContractTest): void {
  test("insertApiKey() with maxLiveKeys never passes the cap, even when inserts race", async ({ store }) => {
    const { user, key } = await seed(store); // one live key already
    await store.revokeApiKey(key.id, { now: T0, ...NO_AUDIT }); // a revoked one does not count
    const attempts = Array.from({ length: 12 }, (_, i) =>
      store.insertApiKey(
        { userId: user.id, keyHash: hashSecret(`race${i}`), prefix: `r${i}`, label: "" },
        { now: T0 + 1, maxLiveKeys: 5, ...NO_AUDIT },
      ));
    const results = await Promise.allSettled(attempts);
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 5);
    for (const result of results) {
      if (result.status === "rejected") assert.ok(result.reason instanceof StoreConflict);
    }
    const live = (await store.listApiKeys(user.id)).filter((k) => k.revokedAt === null);
    assert.equal(live.length, 5, "exactly the cap");
    // Without the option, no cap.
    await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("free"), prefix: "free", label: "" },
      { now: T0 + 2, ...NO_AUDIT },
    );
  });

  test("updateApiKeyLabel() relabels a key and keeps its grants", async ({ store }) => {
    const { key } = await seed(store);
    await store.updateApiKeyLabel(key.id, { now: T0, label: "ci runner", ...NO_AUDIT });
    assert.equal((await store.findApiKeyById(key.id))?.label, "ci runner");
    assert.notEqual(await grantOf(store, "t1", "k1", T0 + 1), undefined);
  });
}
