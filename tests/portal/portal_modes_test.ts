/**
 * The developer portal's sign-up modes end to end (domains, approval through the admin CLI,
 * invite) and the addresses a sign-up takes: one plain mailbox of a listed domain, nothing
 * else stored or mailed.
 *
 * @module
 */
import assert from "node:assert/strict";
import { afterExternalWrite } from "../_helpers/store.ts";
import { runAdminProcess } from "../_helpers/admin_cli.ts";
import { readCode } from "./_smtp.ts";
import { ORIGIN, startPortalRig } from "./_portal.ts";
import { json, PASSWORD } from "./_portal_answers.ts";

Deno.test("[e2e] portal: domains mode takes the listed domains only", async () => {
  await using rig = await startPortalRig({ mode: "domains", domains: ["example.org"] });
  let response = await rig.api("POST", "/signup", { email: "a@other.org", password: PASSWORD });
  assert.equal(response.status, 403);
  assert.equal((await json(response)).error.code, "forbidden");
  assert.equal(await rig.app.store.findUserByEmail("a@other.org"), undefined);
  response = await rig.api("POST", "/signup", { email: "a@example.org", password: PASSWORD });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  await rig.smtp.waitFor("a@example.org", "Verify");
});

Deno.test("[e2e] portal: approval mode waits for an operator, invite mode takes no sign-up", async () => {
  {
    await using rig = await startPortalRig({ mode: "approval" });
    const email = "wait@example.org";
    (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
    const code = readCode(await rig.smtp.waitFor(email, "Verify"));
    let response = await rig.api("POST", "/verify", { email, code, password: PASSWORD });
    assert.equal(response.headers.get("set-cookie"), null, "no session while waiting");
    assert.deepEqual(await json(response), { state: "pending_approval" });
    response = await rig.api("POST", "/signin", { email, password: PASSWORD });
    assert.equal(response.status, 401);
    await response.body?.cancel();
    // The operator approves through the admin CLI, as a process (docs/portal.md).
    const run = await runAdminProcess(rig.app.dbPath, [
      "portal",
      "approve",
      email.toUpperCase(),
      "--origin",
      ORIGIN,
    ]);
    assert.equal(run.code, 0, run.err);
    assert.match(run.out, /Approved wait@example\.org/);
    await afterExternalWrite(rig.app.dbPath);
    const again = await runAdminProcess(rig.app.dbPath, ["portal", "approve", email]);
    assert.equal(again.code, 1);
    assert.match(again.err, /the account is active/);
    await rig.smtp.waitFor(email, "approved");
    assert.ok((await rig.app.store.listAudit()).some((r) => r.action === "portal.approved"));
    await rig.browser().signIn(email, PASSWORD);
  }
  {
    await using rig = await startPortalRig({ mode: "invite" });
    const response = await rig.api("POST", "/signup", {
      email: "x@example.org",
      password: PASSWORD,
    });
    assert.equal(response.status, 403);
    assert.equal((await json(response)).error.code, "forbidden");
  }
});

Deno.test("[e2e] portal: an address that is not one plain mailbox is refused, stored and mailed nowhere", async () => {
  await using rig = await startPortalRig({ mode: "domains", domains: ["corp.example"] });
  const forms = [
    "a@evil.test,x@corp.example",
    "a@evil.test;x@corp.example",
    "<a@corp.example>",
    "v@x.org>@corp.example",
    "Eve <a@corp.example>",
    "a(comment)@corp.example",
    '"a b"@corp.example',
    "a b@corp.example",
    "a@b@corp.example",
    "a..b@corp.example",
    "a@corp..example",
    "a@-corp.example",
  ];
  for (const email of forms) {
    for (
      const [path, body] of [["/signup", { email, password: PASSWORD }], ["/forgot", {
        email,
      }]] as const
    ) {
      const response = await rig.api("POST", path, body);
      assert.equal(response.status, 400, `${path} ${email}`);
      const error = (await json(response)).error;
      assert.equal(error.code, "invalid_request", `${path} ${email}`);
      assert.match(error.message, /^Invalid e-mail/, `${path} ${email}`);
    }
  }
  assert.equal(await rig.app.store.countRows("users"), 0);
  // The outbox keeps sent messages: none was queued (a pending count of 0 would hold once sent).
  assert.deepEqual(await rig.app.store.countMail(), {
    pending: 0,
    sent: 0,
    givenUp: 0,
    failedAttempts: 0,
  });
  // A plain address of the listed domain still signs up, and is mailed alone.
  const response = await rig.api("POST", "/signup", {
    email: "x@corp.example",
    password: PASSWORD,
  });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const mail = await rig.smtp.waitFor("x@corp.example", "Verify");
  assert.deepEqual(mail.to, ["x@corp.example"]);
  assert.equal(rig.smtp.received.length, 1);
});
