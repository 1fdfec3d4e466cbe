/**
 * Refusing and approving a waiting account (issue 25's review): each checks the state again in
 * its write's own transaction, so whichever lands first wins and the other writes nothing (no
 * "approved" mail to a refused address, no refusal of an approved account). The race is held
 * open by a store whose write waits for the test's go, never by timing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { approveAccount } from "../../src/auth/portal/accounts.ts";
import { refuseAccount } from "../../src/auth/portal/approval.ts";
import { AuthError } from "../../src/auth/errors.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import type { Store } from "../../src/store/store.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import { openTestStore } from "../_helpers/store.ts";

const LINKS = { origin: "https://keys.example.org" };

async function waitingAccount(store: Store, email: string, now: number) {
  const user = await store.insertPortalUser(
    { email, passwordHash: "$argon2id$w", tokenTimeoutSeconds: null },
    {
      now,
      state: "pending_verification",
      code: { purpose: "verify", codeHash: hashSecret(email), expiresAt: now + 3_600_000 },
      mail: { recipient: email, subject: "Verify", text: "Your code: ABCD-EFGH" },
      audit: undefined,
    },
  );
  await store.updatePortalState(user.id, { now, state: "pending_approval", audit: undefined });
  return user;
}

/**
 * `store`, but its `method` (when `holds` says so of the call) tells `reached` and then waits
 * for `go()`: the moment between a use case's check and its write, held open.
 */
function withPaused<M extends "deleteUser" | "updatePortalState">(
  store: Store,
  method: M,
  holds: (...args: Parameters<Store[M]>) => boolean = () => true,
) {
  const { promise: reached, resolve: arrive } = Promise.withResolvers<void>();
  const { promise: released, resolve: go } = Promise.withResolvers<void>();
  const paused: Store = Object.create(store);
  const original = store[method].bind(store) as (...args: Parameters<Store[M]>) => unknown;
  paused[method] = (async (...args: Parameters<Store[M]>) => {
    if (holds(...args)) {
      arrive();
      await released;
    }
    return await original(...args);
  }) as Store[M];
  return { store: paused, reached, go };
}

/** Pauses `deleteUser` (a refusal's write). */
const withPausedDelete = (store: Store) => withPaused(store, "deleteUser");

/** Pauses `updatePortalState` to `active` (an approval's write). */
const withPausedApproval = (store: Store) =>
  withPaused(store, "updatePortalState", (_, change) => change.state === "active");

Deno.test("refuseAccount() refuses, deleting nothing, when the account was approved between its check and its delete", async () => {
  await using opened = await openTestStore();
  const clock = createFakeClock();
  const user = await waitingAccount(opened.store, "race@example.org", clock.now());
  const paused = withPausedDelete(opened.store);
  const refusing = refuseAccount({ store: paused.store, clock, actor: "admin:ops" }, user);
  await paused.reached;
  // Another operator approves while the refusal waits between its check and its delete.
  await approveAccount({ store: opened.store, clock, actor: "admin:other" }, user, LINKS);
  paused.go();

  await assert.rejects(refusing, (error: unknown) => {
    assert.ok(error instanceof AuthError);
    assert.equal(error.code, "conflict");
    assert.equal(error.message, "Cannot refuse race@example.org: the account is active");
    return true;
  });
  assert.equal((await opened.store.findUserById(user.id))?.disabled, false, "kept, enabled");
  assert.equal((await opened.store.findPortalAccount(user.id))?.state, "active");
  const actions = (await opened.store.listAudit()).map((row) => row.action);
  assert.ok(actions.includes("portal.approved"));
  assert.ok(!actions.includes("portal.refused"), "no refusal recorded");
});

Deno.test("approveAccount() writes, mails and audits nothing when the account was refused between its check and its write", async () => {
  await using opened = await openTestStore();
  const clock = createFakeClock();
  const user = await waitingAccount(opened.store, "gone@example.org", clock.now());
  const paused = withPausedApproval(opened.store);
  const approving = approveAccount(
    { store: paused.store, clock, actor: "admin:ops" },
    user,
    LINKS,
  );
  await paused.reached;
  // Another operator refuses (deletes) it while the approval waits.
  await refuseAccount({ store: opened.store, clock, actor: "admin:other" }, user);
  const mailBefore = await opened.store.countMail();
  paused.go();

  await assert.rejects(approving, (error: unknown) => {
    assert.ok(error instanceof AuthError);
    assert.equal(error.code, "not_found");
    assert.equal(error.message, 'No portal account for "gone@example.org"');
    return true;
  });
  assert.equal(await opened.store.findUserById(user.id), undefined, "still deleted");
  assert.deepEqual(await opened.store.countMail(), mailBefore, "no approval mail queued");
  const actions = (await opened.store.listAudit()).map((row) => row.action);
  assert.ok(actions.includes("portal.refused"));
  assert.ok(!actions.includes("portal.approved"), "no approval recorded");
});

Deno.test("approveAccount() of an account approved meanwhile is a conflict, with one approval mail", async () => {
  await using opened = await openTestStore();
  const clock = createFakeClock();
  const user = await waitingAccount(opened.store, "twice@example.org", clock.now());
  const mailBefore = await opened.store.countMail();
  const paused = withPausedApproval(opened.store);
  const approving = approveAccount(
    { store: paused.store, clock, actor: "admin:ops" },
    user,
    LINKS,
  );
  await paused.reached;
  await approveAccount({ store: opened.store, clock, actor: "admin:other" }, user, LINKS);
  paused.go();

  await assert.rejects(approving, (error: unknown) => {
    assert.ok(error instanceof AuthError);
    assert.equal(error.code, "conflict");
    assert.equal(error.message, "Cannot approve twice@example.org: the account is active");
    return true;
  });
  assert.equal((await opened.store.countMail()).pending, mailBefore.pending + 1, "one mail");
  const approvals = (await opened.store.listAudit()).filter((row) =>
    row.action === "portal.approved"
  );
  assert.equal(approvals.length, 1);
});

Deno.test("refuseAccount() still deletes an account that waits when its delete runs", async () => {
  await using opened = await openTestStore();
  const clock = createFakeClock();
  const user = await waitingAccount(opened.store, "waits@example.org", clock.now());
  const paused = withPausedDelete(opened.store);
  const refusing = refuseAccount({ store: paused.store, clock, actor: "admin:ops" }, user);
  await paused.reached;
  paused.go();
  assert.deepEqual(await refusing, { apiKeys: 0, tokens: 0, auditRows: 0 });
  assert.equal(await opened.store.findUserById(user.id), undefined);
  assert.equal(await opened.store.findPortalAccount(user.id), undefined);
  const refused = (await opened.store.listAudit()).at(-1)!;
  assert.equal(refused.action, "portal.refused");
  assert.match(refused.subject, /^user:deleted:/);
});
