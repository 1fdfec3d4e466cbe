/**
 * The store contract of the portal's answers to issue 25's review, run by both backends:
 * verification candidates (each code with its sign-up's password hash, at most `keep` live),
 * an operator's user enrolled, and a deleted user's audit rows made anonymous in the delete's
 * transaction.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { AuditEntry, Store } from "../../src/store/store.ts";
import { anonymizing, type ContractTest, entry, HOUR, NO_AUDIT, T0 } from "./_contract_fixtures.ts";

const MAIL = { recipient: "new@b.org", subject: "Verify", text: "Your code: ABCD-EFGH" };

function candidate(name: string) {
  return {
    purpose: "verify" as const,
    codeHash: hashSecret(name),
    expiresAt: T0 + HOUR,
    passwordHash: `$argon2id$${name}`,
  };
}

async function signUp(store: Store, email = "new@b.org") {
  return await store.insertPortalUser(
    { email, passwordHash: "$argon2id$c0", tokenTimeoutSeconds: null },
    {
      now: T0,
      state: "pending_verification",
      code: candidate("c0"),
      mail: MAIL,
      audit: entry("portal.signed_up", `user:${email}`),
    },
  );
}

async function seedOperatorUser(store: Store) {
  const user = await store.insertUser(
    { email: "ops@b.org", passwordHash: "$argon2id$ops", tokenTimeoutSeconds: null },
    { now: T0, ...NO_AUDIT },
  );
  return { userId: user.id };
}

function at(audit: AuditEntry, time: number): AuditEntry {
  return { ...audit, at: time };
}

/** Registers the tests with the contract's `test`. */
export function registerPortalSafetyTests(test: ContractTest): void {
  test("addPortalCode() keeps earlier candidates, at most `keep` live, the oldest ended", async ({ store }) => {
    const user = await signUp(store);
    for (let i = 1; i <= 3; i++) {
      await store.addPortalCode(user.id, {
        now: T0 + i,
        code: candidate(`c${i}`),
        mail: MAIL,
        keep: 3,
        ...NO_AUDIT,
      });
    }
    const live = await store.findPortalCodes(user.id, "verify", T0 + 10);
    assert.deepEqual(live.map((code) => code.passwordHash), [
      "$argon2id$c3",
      "$argon2id$c2",
      "$argon2id$c1",
    ]);
    assert.equal((await store.findUserById(user.id))?.passwordHash, "$argon2id$c0", "unchanged");
    assert.equal((await store.countMail()).pending, 4);
    assert.deepEqual(await store.findPortalCodes(user.id, "verify", T0 + HOUR + 10), []);

    // An attempt may count against several codes at once, or one.
    const ids = live.map((code) => code.id);
    assert.equal(await store.recordPortalCodeAttempt(ids, { now: T0, ...NO_AUDIT }), 1);
    assert.equal(await store.recordPortalCodeAttempt(ids[1], { now: T0, ...NO_AUDIT }), 2);
    assert.deepEqual(
      (await store.findPortalCodes(user.id, "verify", T0 + 10)).map((code) => code.attempts),
      [1, 2, 1],
    );

    // Spending one makes its password the user's; the others stay unused.
    await store.usePortalCode(ids[1], { now: T0 + 20, state: "active", ...NO_AUDIT });
    const stored = (await store.findUserById(user.id))!;
    assert.equal(stored.passwordHash, "$argon2id$c2");
    assert.equal(stored.disabled, false);
    assert.deepEqual(
      (await store.findPortalCodes(user.id, "verify", T0 + 30)).map((code) => code.id),
      [ids[0], ids[2]],
    );
  });

  test("addPortalCode() with keepPerNetwork ends only the oldest of the new code's network", async ({ store }) => {
    const user = await signUp(store);
    const add = (name: string, network: string, now: number) =>
      store.addPortalCode(user.id, {
        now,
        code: { ...candidate(name), network },
        mail: MAIL,
        keep: 4,
        keepPerNetwork: 2,
        ...NO_AUDIT,
      });
    await add("a1", "198.51.100.0/24", T0 + 1);
    for (let i = 1; i <= 3; i++) await add(`b${i}`, "203.0.113.0/24", T0 + 1 + i);
    const names = async () =>
      (await store.findPortalCodes(user.id, "verify", T0 + 10)).map((code) =>
        `${code.passwordHash?.slice("$argon2id$".length)}@${code.network ?? "-"}`
      );
    // c0 (no network, a sign-up from before networks were kept) and a1 stay; b1 ended.
    assert.deepEqual(await names(), [
      "b3@203.0.113.0/24",
      "b2@203.0.113.0/24",
      "a1@198.51.100.0/24",
      "c0@-",
    ]);
    // The total cap (4) then ends the oldest of any network.
    await add("d1", "2001:db8::/64", T0 + 6);
    assert.deepEqual(await names(), [
      "d1@2001:db8::/64",
      "b3@203.0.113.0/24",
      "b2@203.0.113.0/24",
      "a1@198.51.100.0/24",
    ]);
  });

  test("insertPortalAccount() enrols an operator's user once, active and not held", async ({ store }) => {
    const { userId } = await seedOperatorUser(store);
    await store.insertPortalAccount(userId, {
      now: T0 + 1,
      audit: entry("portal.enrolled", "user:ops@b.org"),
    });
    assert.deepEqual(await store.findPortalAccount(userId), {
      userId,
      state: "active",
      createdAt: T0 + 1,
      userHeld: false,
    });
    await assert.rejects(
      store.insertPortalAccount(userId, { now: T0 + 2, audit: entry("portal.enrolled", "x") }),
      StoreConflict,
    );
    assert.deepEqual(
      (await store.listAudit()).filter((row) => row.action === "portal.enrolled").map((row) =>
        row.subject
      ),
      ["user:ops@b.org"],
      "the refused one wrote nothing",
    );
    // A pending sign-up cannot be enrolled past its verification either.
    const pending = await signUp(store, "pending@b.org");
    await assert.rejects(
      store.insertPortalAccount(pending.id, { now: T0 + 3, ...NO_AUDIT }),
      StoreConflict,
    );
    assert.equal((await store.findPortalAccount(pending.id))?.state, "pending_verification");
  });
}

/** Deleting a user with or without making its audit rows anonymous. */
export function registerPortalDeletionTests(test: ContractTest): void {
  test("deleteUser() with anonymousRef renames the user's audit rows, former addresses too", async ({ store, execSql }) => {
    const user = await signUp(store, "first@b.org");
    const other = await signUp(store, "other@b.org");
    await store.appendAudit(
      at(entry("portal.email_change_requested", "user:first@b.org", { to: "asked@b.org" }), T0 + 1),
    );
    await store.updateUserEmail(user.id, {
      email: "second@b.org",
      now: T0 + 2,
      audit: at(
        entry("portal.email_changed", "user:second@b.org", {
          from: "first@b.org",
          user_id: user.id,
        }),
        T0 + 2,
      ),
    });
    await store.appendAudit(at(entry("user.disabled", "user:second@b.org"), T0 + 3));
    await store.appendAudit(
      at(entry("user.renamed", "user:other@b.org", { from: "elsewhere@b.org" }), T0 + 4),
    );
    const before = await store.listAudit();

    const ref = "user:deleted:abcdefghijklmnop";
    const deleted = await store.deleteUser(user.id, {
      now: T0 + 5,
      ...anonymizing(user.id, ref),
      audit: (gone) =>
        at(entry("portal.account_deleted", ref, { audit_rows: gone.auditRows }), T0 + 5),
    });
    assert.deepEqual(deleted, { apiKeys: 0, tokens: 0, auditRows: 4 });
    assert.equal(await store.findUserById(user.id), undefined);

    const after = await store.listAudit();
    assert.equal(after.length, before.length + 1);
    for (const address of ["first@b.org", "second@b.org", "asked@b.org"]) {
      assert.deepEqual(after.filter((row) => JSON.stringify(row).includes(address)), [], address);
    }
    const renamed = after.filter((row) => row.subject === ref);
    assert.deepEqual(renamed.map((row) => row.action), [
      "portal.signed_up",
      "portal.email_change_requested",
      "portal.email_changed",
      "user.disabled",
      "portal.account_deleted",
    ]);
    assert.deepEqual(renamed[1].detail, { to: ref });
    assert.deepEqual(renamed[2].detail, { from: ref, user_id: user.id });
    assert.deepEqual(renamed[4].detail, { audit_rows: 4 });
    // Nothing else of a row changed; another user's rows stay as they were.
    assert.deepEqual(
      after.slice(0, -1).map((row) => [row.id, row.at, row.actor, row.action]),
      before.map((row) => [row.id, row.at, row.actor, row.action]),
    );
    assert.deepEqual(
      after.filter((row) => row.subject === "user:other@b.org"),
      before.filter((row) => row.subject === "user:other@b.org"),
    );
    assert.ok(other.id > 0);

    // Outside that delete, every update is still refused.
    await assert.rejects(
      execSql("UPDATE audit_log SET subject = 'x' WHERE subject = 'user:other@b.org'"),
      /append-only|keygate_audit_redact/,
    );
    await assert.rejects(
      execSql(`UPDATE audit_log SET actor = 'x' WHERE subject = '${ref}'`),
      /append-only|keygate_audit_redact/,
    );
  });

  test("deleteUser() of an operator's user renames its audit rows as a portal user's are", async ({ store }) => {
    const user = await store.insertUser(
      { email: "ops@b.org", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
      { now: T0, audit: entry("user.added", "user:ops@b.org") },
    );
    const kept = await signUp(store, "kept@b.org");
    await store.appendAudit(at(entry("user.disabled", "user:ops@b.org"), T0 + 1));
    const ref = "user:deleted:operatorsuser0001";
    const deleted = await store.deleteUser(user.id, {
      now: T0 + 2,
      ...anonymizing(user.id, ref),
      audit: at(entry("user.deleted", ref), T0 + 2),
    });
    assert.deepEqual(deleted, { apiKeys: 0, tokens: 0, auditRows: 2 });
    assert.deepEqual((await store.listAudit()).map((row) => [row.action, row.subject]), [
      ["user.added", ref],
      ["portal.signed_up", "user:kept@b.org"],
      ["user.disabled", ref],
      ["user.deleted", ref],
    ]);
    assert.notEqual(await store.findUserById(kept.id), undefined);
  });
}
