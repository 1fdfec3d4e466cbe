/**
 * The admin API's approval of portal accounts (`--portal-mode approval`): listing the accounts
 * that wait, approving one (the same domain function as `deno task admin portal approve`) and
 * refusing one (deleted). Every answer is also checked against the OpenAPI document.
 */
import assert from "node:assert/strict";
import type { PortalAccountState, Store } from "../../src/store/store.ts";
import { ADMIN_BASE, type AdminTest, createAdminTest } from "../_helpers/admin_api.ts";

const ORIGIN = "https://portal.example.org";

/** A portal sign-up as the portal writes it, in the given state (mail queued, audited). */
async function seedPortalUser(t: AdminTest, email: string, state: PortalAccountState) {
  const now = t.clock.now();
  const user = await t.store.insertPortalUser(
    { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    {
      now,
      state,
      mail: { recipient: email, subject: "Verify", text: "Your code: ABCD-EFGH" },
      audit: {
        at: now,
        actor: "portal:test",
        action: "portal.signed_up",
        subject: email,
        detail: {},
      },
    },
  );
  t.clock.advance(1000);
  return user;
}

/** Claims every queued message (the mailer's read), for asserting what was queued. */
async function readOutbox(store: Store, now: number) {
  return (await store.claimMail(now + 1, { limit: 100, leaseMs: 60_000 }))
    .map(({ recipient, subject, text }) => ({ recipient, subject, text }));
}

Deno.test("[admin] GET /admin/v1/portal/pending lists only accounts waiting for approval, oldest first, paged", async () => {
  await using t = await createAdminTest({ portalOrigin: ORIGIN });
  await t.addUser("operator-made@example.org");
  const first = await seedPortalUser(t, "first@example.org", "pending_approval");
  await seedPortalUser(t, "unverified@example.org", "pending_verification");
  await seedPortalUser(t, "active@example.org", "active");
  const second = await seedPortalUser(t, "second@example.org", "pending_approval");
  const third = await seedPortalUser(t, "third@example.org", "pending_approval");

  let answer = await t.call("GET", "/admin/v1/portal/pending", { token: t.readToken });
  assert.equal(answer.status, 200);
  assert.deepEqual(answer.body.accounts.map((a: { id: number }) => a.id), [
    first.id,
    second.id,
    third.id,
  ]);
  assert.deepEqual(answer.body.accounts[0], {
    id: first.id,
    email: "first@example.org",
    signed_up_at: new Date(first.createdAt).toISOString(),
  });
  assert.equal(answer.body.next, null);

  answer = await t.call("GET", "/admin/v1/portal/pending?limit=2");
  assert.equal(answer.status, 200);
  assert.equal(answer.body.accounts.length, 2);
  assert.equal(typeof answer.body.next, "string");
  answer = await t.call("GET", `/admin/v1/portal/pending?limit=2&cursor=${answer.body.next}`);
  assert.deepEqual(answer.body.accounts.map((a: { id: number }) => a.id), [third.id]);
  assert.equal(answer.body.next, null);

  answer = await t.call("GET", "/admin/v1/portal/pending?cursor=bm9wZQ");
  assert.equal(answer.status, 400);
  assert.equal(answer.body.error.code, "invalid_request");
  answer = await t.call("GET", "/admin/v1/portal/pending", { token: null });
  assert.equal(answer.status, 401);
});

Deno.test("[admin] POST /admin/v1/portal/pending/:id/approve activates the account, queues its mail, audited", async () => {
  await using t = await createAdminTest({ portalOrigin: ORIGIN });
  const user = await seedPortalUser(t, "wait@example.org", "pending_approval");
  await readOutbox(t.store, t.clock.now()); // the sign-up's own mail
  const path = `/admin/v1/portal/pending/${user.id}/approve`;

  let answer = await t.call("POST", path, { token: t.readToken });
  assert.equal(answer.status, 403);
  assert.equal(answer.body.error.code, "forbidden");
  assert.equal((await t.store.findPortalAccount(user.id))?.state, "pending_approval");

  answer = await t.call("POST", path);
  assert.equal(answer.status, 200);
  assert.deepEqual(answer.body, { id: user.id, status: "approved" });
  assert.equal((await t.store.findPortalAccount(user.id))?.state, "active");
  assert.equal((await t.store.findUserById(user.id))?.disabled, false);
  assert.deepEqual(await readOutbox(t.store, t.clock.now()), [{
    recipient: "wait@example.org",
    subject: "Your account was approved",
    text: `Your account is ready. Sign in: ${ORIGIN}/portal/\n`,
  }]);
  const [row] = await t.store.searchAudit({ limit: 1 });
  assert.deepEqual(
    { actor: row.actor, action: row.action, subject: row.subject },
    { actor: "operator:admin", action: "portal.approved", subject: "user:wait@example.org" },
  );

  const queued = (await t.store.countMail()).pending;
  answer = await t.call("POST", path);
  assert.equal(answer.status, 409);
  assert.equal(answer.body.error.code, "conflict");
  assert.match(answer.body.error.message, /the account is active/);
  assert.equal((await t.store.countMail()).pending, queued);
  const plain = await t.addUser("operator-made@example.org");
  answer = await t.call("POST", `/admin/v1/portal/pending/${plain}/approve`);
  assert.equal(answer.status, 404);
  assert.match(answer.body.error.message, /No portal account/);
  for (const id of ["999999", "0", "abc"]) {
    answer = await t.call("POST", `/admin/v1/portal/pending/${id}/approve`);
    assert.ok(answer.status === 404 || answer.status === 400, `${id}: ${answer.status}`);
  }
  const response = await t.admin(
    new Request(`${ADMIN_BASE}${path}`, { headers: { authorization: `Bearer ${t.writeToken}` } }),
    { remoteAddr: { hostname: "192.0.2.10" } },
  );
  assert.equal(response.status, 405);
  assert.equal(response.headers.get("allow"), "POST");
  await response.body?.cancel();
});

Deno.test("[admin] POST /admin/v1/portal/pending/:id/approve answers 409 when the portal is off", async () => {
  await using t = await createAdminTest();
  const user = await seedPortalUser(t, "wait@example.org", "pending_approval");
  const answer = await t.call("POST", `/admin/v1/portal/pending/${user.id}/approve`);
  assert.equal(answer.status, 409);
  assert.equal(answer.body.error.code, "conflict");
  assert.match(answer.body.error.message, /portal is off/);
  assert.equal((await t.store.findPortalAccount(user.id))?.state, "pending_approval");
});

Deno.test("[admin] POST /admin/v1/portal/pending/:id/refuse deletes the waiting account, audited without its e-mail", async () => {
  await using t = await createAdminTest({ portalOrigin: ORIGIN });
  const user = await seedPortalUser(t, "nope@example.org", "pending_approval");
  const active = await seedPortalUser(t, "active@example.org", "active");
  await readOutbox(t.store, t.clock.now());
  const queued = (await t.store.countMail()).pending;
  const path = `/admin/v1/portal/pending/${user.id}/refuse`;

  let answer = await t.call("POST", path, { token: t.readToken });
  assert.equal(answer.status, 403);
  assert.ok(await t.store.findUserById(user.id));

  answer = await t.call("POST", path);
  assert.equal(answer.status, 200);
  assert.deepEqual(answer.body, { id: user.id, status: "refused" });
  assert.equal(await t.store.findUserById(user.id), undefined);
  assert.equal(await t.store.findPortalAccount(user.id), undefined);
  assert.deepEqual(await readOutbox(t.store, t.clock.now()), []);
  assert.ok((await t.store.countMail()).pending <= queued);
  const [row] = await t.store.searchAudit({ limit: 1 });
  assert.equal(row.actor, "operator:admin");
  assert.equal(row.action, "portal.refused");
  assert.match(row.subject, /^user:deleted:[A-Za-z0-9_-]{16}$/);
  assert.deepEqual(row.detail, { user_id: user.id });
  assert.equal(JSON.stringify(row).includes("nope@example.org"), false);

  answer = await t.call("POST", path);
  assert.equal(answer.status, 404);
  answer = await t.call("POST", `/admin/v1/portal/pending/${active.id}/refuse`);
  assert.equal(answer.status, 409);
  assert.match(
    answer.body.error.message,
    /Cannot refuse active@example\.org: the account is active/,
  );
  assert.ok(await t.store.findUserById(active.id));
  answer = await t.call("GET", "/admin/v1/portal/pending");
  assert.deepEqual(answer.body, { accounts: [], next: null });
});
