/**
 * `--portal-existing-users` (issue 25): users an operator added without a portal account may
 * not sign in to the portal nor reset their password there until enrolled
 * (`deno task admin portal enrol EMAIL`, as a process, as docs/portal.md shows it), unless the
 * setting is on; in `domains`
 * mode, a user outside the allowed domains never signs in. Real handler, test store on both
 * backends, real SMTP server and mailer.
 *
 * @module
 */
import assert from "node:assert/strict";
import { runAdminProcess } from "../_helpers/admin_cli.ts";
import { afterExternalWrite } from "../_helpers/store.ts";
import { readCode } from "./_smtp.ts";
import { type PortalRig, startPortalRig } from "./_portal.ts";

const PASSWORD = "operator typed this 1";
const NEW_PASSWORD = "the owner's own secret 2";

async function signIn(rig: PortalRig, email: string, password: string): Promise<number> {
  const response = await rig.api("POST", "/signin", { email, password });
  await response.body?.cancel();
  return response.status;
}

/** Whether forgot-password queued a reset for `email` (its deferred work given time to run). */
/** Whether forgot-password queued a reset code, read once its deferred work is done. */
async function resetQueued(rig: PortalRig, email: string): Promise<boolean> {
  const calls = rig.mailQueuedCalls();
  const response = await rig.api("POST", "/forgot", { email });
  assert.equal(response.status, 202, "the same answer either way");
  await response.body?.cancel();
  // The route's call, then the deferred work's (a fixed sleep would pass a late code unseen).
  await rig.waitForMailQueued(calls + 2);
  return (await rig.app.store.listAudit()).some((row) =>
    row.action === "portal.reset_requested" && row.subject === `user:${email}`
  );
}

Deno.test("[e2e] portal: with --portal-existing-users off, an operator's user needs enrolling", async () => {
  await using rig = await startPortalRig();
  // The address of docs/portal.md's example, whose command is run as documented.
  const email = "dev@example.org";
  const docs = await Deno.readTextFile(new URL("../../docs/portal.md", import.meta.url));
  assert.ok(docs.includes(`deno task admin portal enrol ${email}\n`));
  assert.ok(docs.includes(`It prints \`Enrolled ${email} in the portal\``));
  await rig.app.addUser(email, PASSWORD);
  assert.equal(await signIn(rig, email, PASSWORD), 401, "not enrolled: no portal sign-in");
  assert.equal(await resetQueued(rig, email), false, "not enrolled: no reset code");
  assert.equal(
    (await rig.app.store.listAudit()).filter((row) => row.action === "portal.sign_in_failed")
      .length,
    1,
  );

  // The operator enrols the user, through the admin CLI as a process.
  const run = await runAdminProcess(rig.app.dbPath, ["portal", "enrol", email]);
  assert.equal(run.code, 0, run.err);
  assert.equal(run.out, `Enrolled ${email} in the portal\n`);
  await afterExternalWrite(rig.app.dbPath);
  const user = (await rig.app.store.findUserByEmail(email))!;
  assert.deepEqual(await rig.app.store.findPortalAccount(user.id), {
    userId: user.id,
    state: "active",
    createdAt: (await rig.app.store.findPortalAccount(user.id))!.createdAt,
    userHeld: false,
  });
  const enrolled = (await rig.app.store.listAudit()).find((r) => r.action === "portal.enrolled");
  assert.equal(enrolled?.subject, `user:${email}`);
  assert.equal(enrolled?.actor, "cli:ops");
  const again = await runAdminProcess(rig.app.dbPath, ["portal", "enrol", email]);
  assert.equal(again.code, 1);
  assert.equal(again.out, "");
  assert.match(
    again.err,
    /Cannot enrol dev@example\.org: it has a portal account already \(active\)/,
  );

  assert.equal(await signIn(rig, email, PASSWORD), 200, "enrolled: signs in");
  assert.equal(await resetQueued(rig, email), true, "enrolled: a reset code");
  const code = readCode(await rig.smtp.waitFor(email, "Reset"));
  const response = await rig.api("POST", "/reset", { email, code, password: NEW_PASSWORD });
  assert.equal(response.status, 200);
  await response.body?.cancel();
  assert.equal(await signIn(rig, email, NEW_PASSWORD), 200);
});

Deno.test("[e2e] portal: with --portal-existing-users on, an operator's user signs in as before", async () => {
  await using rig = await startPortalRig({ existingUsers: true });
  const email = "legacy@example.org";
  await rig.app.addUser(email, PASSWORD);
  assert.equal(await signIn(rig, email, PASSWORD), 200);
  assert.equal(await resetQueued(rig, email), true);
  await rig.smtp.waitFor(email, "Reset");
  const user = (await rig.app.store.findUserByEmail(email))!;
  assert.equal(await rig.app.store.findPortalAccount(user.id), undefined, "nothing enrolled");
});

Deno.test("[e2e] portal: in domains mode, a user outside the allowed domains never signs in", async () => {
  await using rig = await startPortalRig({
    mode: "domains",
    domains: ["corp.example"],
    existingUsers: true,
  });
  await rig.app.addUser("inside@corp.example", PASSWORD);
  await rig.app.addUser("outside@else.example", PASSWORD);
  assert.equal(await signIn(rig, "inside@corp.example", PASSWORD), 200);
  assert.equal(await signIn(rig, "outside@else.example", PASSWORD), 401);
  assert.equal(await resetQueued(rig, "outside@else.example"), false);
  // Enrolled or not.
  const run = await runAdminProcess(rig.app.dbPath, ["portal", "enrol", "outside@else.example"]);
  assert.equal(run.code, 0, run.err);
  await afterExternalWrite(rig.app.dbPath);
  assert.equal(await signIn(rig, "outside@else.example", PASSWORD), 401);
});
