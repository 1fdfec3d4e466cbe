/**
 * The store contract of refusing a portal account, run by both backends: `deleteUser` with
 * `onlyPortalState` deletes only while the account is in that state, checked in its own
 * transaction (an approval that won the race is never undone by a refusal).
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { StoreConflict } from "../../src/store/errors.ts";
import type { Store } from "../../src/store/store.ts";
import { type ContractTest, entry, HOUR, NO_AUDIT, T0 } from "./_contract_fixtures.ts";

async function waitingAccount(store: Store, email: string) {
  const user = await store.insertPortalUser(
    { email, passwordHash: "$argon2id$w", tokenTimeoutSeconds: null },
    {
      now: T0,
      state: "pending_verification",
      code: { purpose: "verify", codeHash: hashSecret(email), expiresAt: T0 + HOUR },
      mail: { recipient: email, subject: "Verify", text: "Your code: ABCD-EFGH" },
      ...NO_AUDIT,
    },
  );
  await store.updatePortalState(user.id, { now: T0, state: "pending_approval", ...NO_AUDIT });
  return user;
}

/** Registers the tests with the contract's `test`. */
export function registerPortalRefusalTests(test: ContractTest): void {
  test("deleteUser() with onlyPortalState deletes only an account in that state", async ({ store }) => {
    const waiting = await waitingAccount(store, "waits@b.org");
    const approved = await waitingAccount(store, "approved@b.org");
    await store.updatePortalState(approved.id, { now: T0 + 1, state: "active", ...NO_AUDIT });
    const operators = await store.insertUser(
      { email: "ops@b.org", passwordHash: "$argon2id$o", tokenTimeoutSeconds: null },
      { now: T0, ...NO_AUDIT },
    );
    const audits = (await store.listAudit()).length;
    const only = {
      now: T0 + 2,
      onlyPortalState: "pending_approval" as const,
      anonymousRef: "user:deleted:x",
      anonymousActor: "portal:user:0",
    };
    const refused = entry("portal.refused", "user:deleted:x");
    for (const user of [approved, operators]) {
      await assert.rejects(
        store.deleteUser(user.id, { ...only, audit: refused }),
        StoreConflict,
        `user ${user.email}: no account waiting, nothing deleted`,
      );
      assert.ok(await store.findUserById(user.id));
    }
    assert.equal((await store.findPortalAccount(approved.id))?.state, "active");
    assert.equal((await store.listAudit()).length, audits, "no audit entry for a refused delete");

    assert.deepEqual(
      await store.deleteUser(waiting.id, { ...only, audit: refused }),
      { apiKeys: 0, tokens: 0, auditRows: 0 },
    );
    assert.equal(await store.findUserById(waiting.id), undefined);
    assert.equal(await store.findPortalAccount(waiting.id), undefined);
    assert.equal((await store.listAudit()).at(-1)?.action, "portal.refused");
    // Gone: a second refusal finds no account either.
    await assert.rejects(store.deleteUser(waiting.id, { ...only, ...NO_AUDIT }), StoreConflict);
  });

  registerRefusedMailTest(test);
  test("updatePortalState() with from changes only an account in that state, writing nothing else", async ({ store }) => {
    const waiting = await waitingAccount(store, "approve@b.org");
    const gone = await waitingAccount(store, "gone@b.org");
    await store.deleteUser(gone.id, {
      now: T0 + 1,
      anonymousRef: "user:deleted:y",
      anonymousActor: "portal:user:0",
      ...NO_AUDIT,
    });
    const audits = (await store.listAudit()).length;
    const mail = await store.countMail();
    const approve = {
      now: T0 + 2,
      state: "active" as const,
      from: "pending_approval" as const,
      mail: { recipient: "x@b.org", subject: "Approved", text: "Welcome" },
      audit: entry("portal.approved", "user:x"),
    };
    await assert.rejects(store.updatePortalState(gone.id, approve), StoreConflict);
    await store.updatePortalState(waiting.id, approve);
    assert.equal((await store.findPortalAccount(waiting.id))?.state, "active");
    assert.equal((await store.findUserById(waiting.id))?.disabled, false, "held user enabled");
    // Approved already: a second approval conflicts and writes nothing.
    await assert.rejects(store.updatePortalState(waiting.id, approve), StoreConflict);
    assert.equal((await store.countMail()).pending, mail.pending + 1, "one mail queued");
    assert.equal((await store.listAudit()).length, audits + 1, "one audit entry");
  });
}

/** The refused account's outbox: its queued mail goes, mail to an address held by another stays. */
function registerRefusedMailTest(test: ContractTest): void {
  test("deleteUser() refusing an account drops its queued mail, not mail to an address another user holds now", async ({ store }) => {
    // The account signed up as old@, an operator moved it to queued@, and another user took
    // old@: mail to old@ is that user's now.
    const waiting = await store.insertPortalUser(
      { email: "old@b.org", passwordHash: "$argon2id$w", tokenTimeoutSeconds: null },
      {
        now: T0,
        state: "pending_verification",
        code: { purpose: "verify", codeHash: hashSecret("old"), expiresAt: T0 + HOUR },
        mail: { recipient: "old@b.org", subject: "Verify", text: "Your code: ABCD-EFGH" },
        audit: entry("portal.signed_up", "user:old@b.org"),
      },
    );
    await store.updateUserEmail(waiting.id, {
      email: "queued@b.org",
      now: T0 + 1,
      audit: entry("user.renamed", "user:queued@b.org", { from: "old@b.org" }),
    });
    await store.insertMail(
      { recipient: "queued@b.org", subject: "Verify", text: "Your code: IJKL-MNOP" },
      { now: T0 + 1, ...NO_AUDIT },
    );
    await store.updatePortalState(waiting.id, {
      now: T0 + 1,
      state: "pending_approval",
      ...NO_AUDIT,
    });
    const other = await store.insertUser(
      { email: "old@b.org", passwordHash: "$argon2id$o", tokenTimeoutSeconds: null },
      { now: T0 + 2, ...NO_AUDIT },
    );
    await store.insertMail(
      { recipient: other.email, subject: "Notice", text: "For the new holder" },
      { now: T0 + 2, ...NO_AUDIT },
    );
    assert.equal((await store.countMail()).pending, 3);
    await store.deleteUser(waiting.id, {
      now: T0 + 3,
      onlyPortalState: "pending_approval",
      anonymousRef: "user:deleted:q",
      anonymousActor: `portal:user:${waiting.id}`,
      audit: entry("portal.refused", "user:deleted:q"),
    });
    assert.equal(await store.findUserById(waiting.id), undefined);
    // Mail to old@ stays, whoever it was queued for: the store cannot tell the holders' apart.
    assert.deepEqual(
      (await store.claimMail(T0 + 4, { limit: 10, leaseMs: 1000 }))
        .map((m) => [m.recipient, m.subject]),
      [["old@b.org", "Verify"], ["old@b.org", "Notice"]],
      "the refused account's mail to queued@ is never sent; mail to old@'s new holder stays",
    );
    assert.equal((await store.countMail()).pending, 2, "nothing else left in the outbox");
  });
}
