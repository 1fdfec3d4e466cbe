/**
 * The portal's answers to a security review (issue 25): a stranger's sign-up of a pending
 * address ends neither the owner's code nor password; a deleted account leaves no address in
 * any audit row. Real handler, test store on both backends, real SMTP server and mailer.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  MAX_VERIFY_CANDIDATES,
  MAX_VERIFY_CANDIDATES_PER_NETWORK,
} from "../../src/auth/portal/accounts.ts";
import { refuseAccount } from "../../src/auth/portal/approval.ts";
import { PORTAL_THROTTLE_RULES } from "../../src/auth/portal/portal_throttle.ts";
import { readCode } from "./_smtp.ts";
import { activeUser, type PortalRig, postFrom, startPortalRig } from "./_portal.ts";
import {
  json,
  OTHER_PASSWORD as STRANGER_PASSWORD,
  PASSWORD as OWNER_PASSWORD,
} from "./_portal_answers.ts";

Deno.test("[e2e] a stranger re-signing-up a pending address ends neither the owner's code nor password", async () => {
  await using rig = await startPortalRig();
  const email = "owner@example.org";
  let response = await rig.api("POST", "/signup", { email, password: OWNER_PASSWORD });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const ownerCode = readCode(await rig.smtp.waitFor(email, "Verify"));
  response = await rig.api("POST", "/signup", { email, password: STRANGER_PASSWORD });
  assert.equal(response.status, 202, "the same answer as the first sign-up");
  await response.body?.cancel();
  const strangerCode = readCode(await rig.smtp.waitFor(email, "Verify", { skip: 1 }));
  assert.notEqual(strangerCode, ownerCode);

  // A code never works with the other sign-up's password (no pre-hijacking).
  response = await rig.api("POST", "/verify", {
    email,
    code: strangerCode,
    password: OWNER_PASSWORD,
  });
  assert.equal(response.status, 400);
  assert.equal((await json(response)).error.code, "invalid_request");
  const user = (await rig.app.store.findUserByEmail(email))!;
  assert.equal((await rig.app.store.findPortalAccount(user.id))?.state, "pending_verification");

  // The owner's own code and password still verify, and become the account's.
  response = await rig.api("POST", "/verify", { email, code: ownerCode, password: OWNER_PASSWORD });
  assert.equal(response.status, 200);
  assert.equal((await json(response)).state, "active");
  assert.equal((await rig.app.store.findPortalAccount(user.id))?.state, "active");
  // Signed in with the owner's password; the stranger's is refused.
  await rig.browser().signIn(email, OWNER_PASSWORD);
  response = await rig.api("POST", "/signin", { email, password: STRANGER_PASSWORD });
  assert.equal(response.status, 401);
  await response.body?.cancel();
  // The stranger's candidate stays unusable once the account is active.
  response = await rig.api("POST", "/verify", {
    email,
    code: strangerCode,
    password: STRANGER_PASSWORD,
  });
  assert.equal(response.status, 400, "an active account verifies no more");
  await response.body?.cancel();
});

/** A sign-up of `email` from `address`. */
async function signUpFrom(rig: PortalRig, address: string, email: string, password: string) {
  assert.equal((await postFrom(rig, address, "/signup", { email, password })).status, 202);
}

Deno.test("[e2e] a pending address keeps the newest candidates of each network; one network ends only its own", async () => {
  const loose = { threshold: 100, baseDelayMs: 60_000, maxDelayMs: 60_000, windowMs: 3_600_000 };
  await using rig = await startPortalRig({
    throttleRules: { ...PORTAL_THROTTLE_RULES, mail: loose, mailCeiling: loose },
  });
  const email = "many@example.org";
  const live = async () => {
    const user = (await rig.app.store.findUserByEmail(email))!;
    return await rig.app.store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  };
  await signUpFrom(rig, "198.51.100.7", email, OWNER_PASSWORD);
  const ownerCode = readCode(await rig.smtp.waitFor(email, "Verify"));
  const ownerId = (await live())[0].id;
  // One stranger network, one sign-up more than its share: its own oldest ends.
  const strangerCodes: string[] = [];
  for (let i = 1; i <= MAX_VERIFY_CANDIDATES_PER_NETWORK + 1; i++) {
    await signUpFrom(rig, `203.0.113.${i}`, email, `${STRANGER_PASSWORD} ${i}`);
    strangerCodes.push(readCode(await rig.smtp.waitFor(email, "Verify", { skip: i })));
  }
  let codes = await live();
  assert.equal(codes.length, 1 + MAX_VERIFY_CANDIDATES_PER_NETWORK);
  assert.ok(codes.some((code) => code.id === ownerId), "the owner's candidate stays");
  assert.deepEqual(
    codes.map((code) => code.network).toSorted(),
    ["198.51.100.0/24", ...Array(MAX_VERIFY_CANDIDATES_PER_NETWORK).fill("203.0.113.0/24")],
  );
  assert.ok(codes.every((code) => code.passwordHash !== undefined), "each with its password");
  let response = await rig.api("POST", "/verify", {
    email,
    code: strangerCodes[0],
    password: `${STRANGER_PASSWORD} 1`,
  });
  assert.equal(response.status, 400, "the network's oldest candidate ended");
  await response.body?.cancel();
  // Up to the total, other networks end nothing; beyond it, the oldest of any network ends.
  const more = MAX_VERIFY_CANDIDATES - codes.length;
  for (let i = 1; i <= more; i++) {
    await signUpFrom(rig, `10.0.${i}.9`, email, `${STRANGER_PASSWORD} net ${i}`);
  }
  codes = await live();
  assert.equal(codes.length, MAX_VERIFY_CANDIDATES);
  assert.ok(codes.some((code) => code.id === ownerId), "the owner's candidate stays");
  await signUpFrom(rig, "10.1.0.9", email, `${STRANGER_PASSWORD} last`);
  codes = await live();
  assert.equal(codes.length, MAX_VERIFY_CANDIDATES);
  assert.ok(!codes.some((code) => code.id === ownerId), "past the total, the oldest ends");
  response = await rig.api("POST", "/verify", {
    email,
    code: ownerCode,
    password: OWNER_PASSWORD,
  });
  assert.equal(response.status, 400);
  await response.body?.cancel();
  response = await rig.api("POST", "/verify", {
    email,
    code: strangerCodes[1],
    password: `${STRANGER_PASSWORD} 2`,
  });
  assert.equal(response.status, 200);
  assert.equal((await json(response)).state, "active");
});

Deno.test("[e2e] deleting an account leaves its addresses in no audit row, of any action", async () => {
  await using rig = await startPortalRig();
  const email = "leaver@example.org";
  const browser = await activeUser(rig, email, OWNER_PASSWORD);
  // A former address (an e-mail change) and a change asked but never confirmed.
  let response = await browser.call("POST", "/email", {
    email: "moved@example.org",
    password: OWNER_PASSWORD,
  });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const moved = readCode(await rig.smtp.waitFor("moved@example.org", "Confirm your new e-mail"));
  response = await browser.call("POST", "/email/confirm", { code: moved });
  assert.equal(response.status, 200);
  await response.body?.cancel();
  response = await browser.call("POST", "/email", {
    email: "never@example.org",
    password: OWNER_PASSWORD,
  });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  // Another user's rows stay as they are.
  (await rig.api("POST", "/signup", { email: "other@example.org", password: OWNER_PASSWORD }))
    .body?.cancel();
  const before = await rig.app.store.listAudit();
  assert.ok(before.some((row) => JSON.stringify(row).includes(email)));

  response = await browser.call("POST", "/account/delete", { password: OWNER_PASSWORD });
  assert.equal(response.status, 200);
  await response.body?.cancel();

  const after = await rig.app.store.listAudit();
  assert.equal(after.length, before.length + 1, "no row lost, one added");
  for (const address of [email, "moved@example.org", "never@example.org"]) {
    const left = after.filter((row) => JSON.stringify(row).includes(address));
    assert.deepEqual(left, [], address);
  }
  const deleted = after.find((row) => row.action === "portal.account_deleted")!;
  assert.match(deleted.subject, /^user:deleted:[A-Za-z0-9_-]{16}$/);
  const renamed = after.filter((row) => row.subject === deleted.subject);
  assert.ok(renamed.some((row) => row.action === "portal.signed_up"));
  assert.ok(renamed.some((row) => row.action === "portal.email_changed"));
  assert.equal(deleted.detail.audit_rows_anonymized, renamed.length - 1);
  assert.ok(after.some((row) => row.subject === "user:other@example.org"), "others untouched");
  // Outside that one delete, the log is still append-only.
  await assert.rejects(
    rig.app.querySql("UPDATE audit_log SET subject = 'x' WHERE action = 'portal.signed_up'"),
    /append-only|keygate_audit_redact/,
  );
});

Deno.test("[e2e] refusing a waiting account leaves its address in no audit row", async () => {
  await using rig = await startPortalRig({ mode: "approval" });
  const email = "refused@example.org";
  (await rig.api("POST", "/signup", { email, password: OWNER_PASSWORD })).body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  const response = await rig.api("POST", "/verify", { email, code, password: OWNER_PASSWORD });
  assert.deepEqual(await json(response), { state: "pending_approval" });
  const user = (await rig.app.store.findUserByEmail(email))!;
  const before = await rig.app.store.listAudit();
  assert.ok(before.some((row) => row.subject === `user:${email}`));

  await refuseAccount({ store: rig.app.store, clock: rig.app.clock, actor: "cli:ops" }, user);

  const after = await rig.app.store.listAudit();
  assert.equal(after.length, before.length + 1);
  assert.deepEqual(after.filter((row) => JSON.stringify(row).includes(email)), []);
  const refused = after.at(-1)!;
  assert.equal(refused.action, "portal.refused");
  assert.ok(after.filter((row) => row.subject === refused.subject).length >= 3);
});
