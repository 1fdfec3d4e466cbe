/**
 * The store contract's portal mail outbox: messages leased, sent, retried and given up, and
 * counted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type ContractTest, NO_AUDIT, T0 } from "./_contract_fixtures.ts";
import { MAIL } from "./contract_portal.ts";

/** The outbox: leases of due messages, a give-up that clears the body, the counts. */
export function registerPortalMailTests(test: ContractTest): void {
  test("claimMail() leases due messages; sent ones are cleared, failed ones wait", async ({ store }) => {
    await store.insertMail(MAIL, { now: T0, ...NO_AUDIT });
    await store.insertMail({ ...MAIL, subject: "Second" }, { now: T0 + 1, ...NO_AUDIT });
    assert.deepEqual(await store.claimMail(T0 - 1, { limit: 10, leaseMs: 1000 }), []);
    const claimed = await store.claimMail(T0 + 1, { limit: 10, leaseMs: 1000 });
    assert.deepEqual(claimed.map((m) => [m.subject, m.text, m.attempts]), [
      ["Verify", MAIL.text, 1],
      ["Second", MAIL.text, 1],
    ]);
    assert.deepEqual(await store.claimMail(T0 + 2, { limit: 10, leaseMs: 1000 }), [], "leased");
    await store.markMailSent(claimed[0].id, T0 + 3);
    await store.markMailFailed(claimed[1].id, {
      now: T0 + 3,
      nextAttemptAt: T0 + 5000,
      error: "x",
    });
    assert.equal((await store.countMail()).pending, 1);
    assert.deepEqual(await store.claimMail(T0 + 4999, { limit: 10, leaseMs: 1000 }), []);
    const retried = await store.claimMail(T0 + 5000, { limit: 10, leaseMs: 1000 });
    assert.deepEqual(retried.map((m) => [m.id, m.text, m.attempts]), [[
      claimed[1].id,
      MAIL.text,
      2,
    ]]);
    await store.markMailFailed(claimed[1].id, {
      now: T0 + 3,
      nextAttemptAt: null,
      error: "gave up",
    });
    assert.equal((await store.countMail()).pending, 0);
  });

  test("markMailFailed() giving up clears the body (and its code); a retry keeps it", async ({ store, execSql }) => {
    await store.insertMail(MAIL, { now: T0, ...NO_AUDIT });
    const [mail] = await store.claimMail(T0, { limit: 10, leaseMs: 1000 });
    await store.markMailFailed(mail.id, { now: T0 + 1, nextAttemptAt: T0 + 2, error: "down" });
    const [again] = await store.claimMail(T0 + 2, { limit: 10, leaseMs: 1000 });
    assert.equal(again.text, MAIL.text, "kept for the retry");
    await store.markMailFailed(mail.id, { now: T0 + 3, nextAttemptAt: null, error: "gave up" });
    assert.equal((await store.countMail()).givenUp, 1);
    // Queued again by hand, as an operator could: what is stored is read back, without a body.
    await execSql(`UPDATE mail_outbox SET next_attempt_at = 0 WHERE id = ${mail.id}`);
    const [stored] = await store.claimMail(T0 + 4, { limit: 10, leaseMs: 1000 });
    assert.equal(stored.id, mail.id);
    assert.equal(stored.subject, MAIL.subject);
    assert.equal(stored.text, "", "no body (nor code) kept once given up");
  });

  test("countMail() counts pending, sent, given-up messages and failed attempts", async ({ store }) => {
    assert.deepEqual(await store.countMail(), {
      pending: 0,
      sent: 0,
      givenUp: 0,
      failedAttempts: 0,
    });
    for (const subject of ["A", "B", "C"]) {
      await store.insertMail({ ...MAIL, subject }, { now: T0, ...NO_AUDIT });
    }
    const [a, b, c] = await store.claimMail(T0, { limit: 10, leaseMs: 1000 });
    assert.deepEqual(await store.countMail(), {
      pending: 3,
      sent: 0,
      givenUp: 0,
      failedAttempts: 0,
    });
    await store.markMailSent(a.id, T0 + 1);
    await store.markMailFailed(b.id, { now: T0 + 1, nextAttemptAt: T0 + 10, error: "down" });
    await store.markMailFailed(c.id, { now: T0 + 1, nextAttemptAt: null, error: "refused" });
    assert.deepEqual(await store.countMail(), {
      pending: 1,
      sent: 1,
      givenUp: 1,
      failedAttempts: 2,
    });
    const [again] = await store.claimMail(T0 + 10, { limit: 10, leaseMs: 1000 });
    await store.markMailSent(again.id, T0 + 11);
    assert.deepEqual(await store.countMail(), {
      pending: 0,
      sent: 2,
      givenUp: 1,
      failedAttempts: 2,
    });
  });
}
