/**
 * The janitor's expiry of unverified portal sign-ups: a few per write transaction (each deletion
 * reads the audit log to anonymise the account's rows, so the write lock stays short), and, on
 * PostgreSQL, an account whose user row is gone (the portal's rows hold no foreign key there) is
 * deleted instead of being selected first by every sweep.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createJanitor, UNVERIFIED_PER_WRITE } from "../../src/auth/janitor.ts";
import type { Store } from "../../src/store/store.ts";
import { createCapturingLogger } from "../_helpers/capturing_logger.ts";
import { querySqlAt, TEST_STORE_NAME } from "../_helpers/store.ts";
import { createTestApp, type TestApp } from "../_helpers/test_app.ts";

const DAY = 24 * 3600_000;

function signUp(app: TestApp, email: string, at: number) {
  return app.store.insertPortalUser(
    { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    {
      now: at,
      state: "pending_verification",
      code: { purpose: "verify", codeHash: new Uint8Array(32), expiresAt: at + DAY },
      mail: { recipient: email, subject: "Verify", text: "code" },
      audit: undefined,
    },
  );
}

Deno.test("janitor: unverified sign-ups go a few per write, whatever the batch size", async () => {
  await using app = await createTestApp();
  const start = app.clock.now();
  const users = [];
  for (let i = 0; i < 12; i++) users.push(await signUp(app, `old${i}@example.org`, start));
  const limits: number[] = [];
  const store: Store = Object.assign(Object.create(app.store), {
    deleteUnverifiedPortalUsers(...args: Parameters<Store["deleteUnverifiedPortalUsers"]>) {
      limits.push(args[1].limit);
      return app.store.deleteUnverifiedPortalUsers(...args);
    },
  });
  app.clock.set(start + 8 * DAY);
  const { logger } = createCapturingLogger();
  await createJanitor({
    store,
    clock: app.clock,
    logger,
    retentionSeconds: 7 * 86400,
    unverifiedTtlSeconds: 7 * 86400,
    batchRows: 500,
  }).sweep();
  assert.ok(limits.length >= Math.ceil(12 / UNVERIFIED_PER_WRITE), `${limits.length} writes`);
  assert.ok(limits.every((limit) => limit === UNVERIFIED_PER_WRITE), `limits ${limits}`);
  for (const user of users) assert.equal(await app.store.findUserById(user.id), undefined);
});

/** One unverified sign-up created before `before` deleted, as the janitor's expiry does. */
function expireOne(app: TestApp, before: number) {
  return app.store.deleteUnverifiedPortalUsers(before, {
    now: app.clock.now(),
    limit: 1,
    anonymize: (userId) => ({
      anonymousRef: `user:deleted:${userId}`,
      anonymousActor: `portal:user:${userId}`,
    }),
    audit: () => [],
  });
}

Deno.test({
  name: "janitor: on PostgreSQL, an unverified account whose user row is gone is deleted too",
  ignore: TEST_STORE_NAME !== "postgres",
  async fn() {
    await using app = await createTestApp();
    const start = app.clock.now();
    const orphan = await signUp(app, "orphan@example.org", start);
    const kept = await signUp(app, "kept@example.org", start + 1000); // after the orphan
    // A restored older dump: the user row gone, its portal rows left (no foreign key there).
    await querySqlAt(app.dbPath, `DELETE FROM users WHERE id = ${orphan.id}`);
    app.clock.set(start + 8 * DAY);
    const gone = await expireOne(app, start + DAY);
    assert.deepEqual(gone, [], "nothing reported: there was no user to delete");
    assert.equal(await app.store.findPortalAccount(orphan.id), undefined, "its account went");
    // The next run reaches the other sign-up instead of selecting the orphan again.
    const next = await expireOne(app, start + DAY);
    assert.deepEqual(next.map((deleted) => deleted.userId), [kept.id]);
  },
});
