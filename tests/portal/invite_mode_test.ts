/**
 * Invite mode's documented path end to end (docs/portal.md, "invite"): nobody signs up; an
 * operator adds the user (`deno task admin user add EMAIL`) and enrols it (`deno task admin
 * portal enrol EMAIL`), both as the processes an operator types; the user asks for a reset
 * code, reads it from the real SMTP server, sets a password and signs in. Real handler, test
 * store on both backends, real mailer.
 *
 * @module
 */
import assert from "node:assert/strict";
import { runAdminProcess } from "../_helpers/admin_cli.ts";
import { issueToken, secureGet } from "../_helpers/requests.ts";
import { afterExternalWrite } from "../_helpers/store.ts";
import { readCode } from "./_smtp.ts";
import { type PortalRig, startPortalRig } from "./_portal.ts";
import { assertError, json, PASSWORD } from "./_portal_answers.ts";

/** The password the operator typed: the user never learns it. */
const OPERATOR_PASSWORD = "operator typed this 1";

async function signInStatus(rig: PortalRig, email: string, password: string): Promise<number> {
  const response = await rig.api("POST", "/signin", { email, password });
  await response.body?.cancel();
  return response.status;
}

/** Asks for a reset code; whether one was queued, read once the deferred work is done. */
async function forgot(rig: PortalRig, email: string): Promise<boolean> {
  const calls = rig.mailQueuedCalls();
  const response = await rig.api("POST", "/forgot", { email });
  assert.equal(response.status, 202, "the same answer either way");
  assert.equal((await json(response)).status, "accepted");
  // The route's call, then the deferred work's: no fixed sleep that a late code would pass.
  await rig.waitForMailQueued(calls + 2);
  return (await rig.app.store.listAudit()).some((row) =>
    row.action === "portal.reset_requested" && row.subject === `user:${email}`
  );
}

Deno.test("[e2e] portal: invite mode, user add → portal enrol (processes) → forgot → mailed code → reset → sign in", async () => {
  await using rig = await startPortalRig({ mode: "invite" });
  const email = "invited@example.org";
  const docs = await Deno.readTextFile(new URL("../../docs/portal.md", import.meta.url));
  assert.match(
    docs,
    /- `invite`: nobody signs up[^]*?`deno task admin user add\s+EMAIL`\) and enrols/,
  );
  assert.match(docs, /chooses\s+"Forgot your password\?" and sets one with the mailed code/);

  // Nobody signs up, the address to be invited included.
  await assertError(
    await rig.api("POST", "/signup", { email, password: PASSWORD }),
    403,
    "forbidden",
  );
  assert.equal(await rig.app.store.findUserByEmail(email), undefined);

  // The operator adds the user, as a process, the password on standard input.
  const added = await runAdminProcess(
    rig.app.dbPath,
    ["user", "add", email],
    `${OPERATOR_PASSWORD}\n`,
  );
  assert.equal(added.code, 0, added.err);
  assert.ok(!added.out.includes(OPERATOR_PASSWORD) && !added.err.includes(OPERATOR_PASSWORD));
  await afterExternalWrite(rig.app.dbPath);
  const user = await rig.app.store.findUserByEmail(email);
  assert.ok(user !== undefined, "the user exists");
  // Not enrolled yet: the portal neither signs it in nor mails it a code.
  assert.equal(await signInStatus(rig, email, OPERATOR_PASSWORD), 401);
  assert.equal(await forgot(rig, email), false, "no reset code before enrolment");

  // The operator enrols it, as a process.
  const enrolled = await runAdminProcess(rig.app.dbPath, ["portal", "enrol", email]);
  assert.equal(enrolled.code, 0, enrolled.err);
  assert.equal(enrolled.out, `Enrolled ${email} in the portal\n`);
  await afterExternalWrite(rig.app.dbPath);
  assert.equal((await rig.app.store.findPortalAccount(user.id))?.state, "active");

  // The user: "Forgot your password?", the code from the mail, a password of their own.
  assert.equal(await forgot(rig, email), true);
  const mail = await rig.smtp.waitFor(email, "Reset");
  assert.deepEqual(mail.to, [email]);
  assert.ok(!mail.raw.includes(OPERATOR_PASSWORD), "the operator's password is never mailed");
  const code = readCode(mail);
  await assertError(
    await rig.api("POST", "/reset", { email, code: "AAAAA-BBBBB", password: PASSWORD }),
    400,
    "invalid_request",
  );
  let response = await rig.api("POST", "/reset", { email, code, password: PASSWORD });
  assert.equal(response.status, 200);
  assert.deepEqual(await json(response), { status: "password_changed", tokens_revoked: 0 });
  await rig.smtp.waitFor(email, "password was changed");
  response = await rig.api("POST", "/reset", { email, code, password: PASSWORD });
  assert.equal(response.status, 400, "a code works once");
  await response.body?.cancel();

  assert.equal(await signInStatus(rig, email, OPERATOR_PASSWORD), 401, "the operator's is gone");
  const browser = rig.browser();
  await browser.signIn(email, PASSWORD);
  // Signed in, the invited user makes a key and uses it.
  const created = await json(await browser.call("POST", "/keys", { label: "first" }));
  const token = await issueToken(rig.app.handler, email, PASSWORD, created.api_key);
  response = await secureGet(
    rig.app.handler,
    "/api/secure/userservice/tokens/current",
    created.api_key,
    token,
  );
  assert.equal(response.status, 200);
  await response.body?.cancel();

  const audit = await rig.app.store.listAudit();
  const actions = audit.map((row) => row.action);
  for (
    const action of [
      "portal.enrolled",
      "portal.reset_requested",
      "portal.password_reset",
      "portal.signed_in",
    ]
  ) {
    assert.ok(actions.includes(action), action);
  }
  assert.equal(actions.includes("portal.signed_up"), false, "no sign-up in invite mode");
  assert.ok(!JSON.stringify(audit).includes(code), "no code in the audit log");
});
