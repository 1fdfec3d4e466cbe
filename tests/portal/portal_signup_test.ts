/**
 * The developer portal's sign-up and verification end to end over the real handler, the test
 * store (both backends), a real SMTP server and the real mailer: the whole path from sign-up to
 * a reset that ends the token, a sign-up ahead of the owner, an operator's disable, and each mail
 * sent once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { issueToken, secureGet } from "../_helpers/requests.ts";
import { readCode } from "./_smtp.ts";
import { startPortalRig, TEST_CODE_KEY, waitForSentMail } from "./_portal.ts";
import { hashCode } from "../../src/auth/portal/codes.ts";
import { json, NEW_PASSWORD, PASSWORD } from "./_portal_answers.ts";

Deno.test("[e2e] portal: sign up, verify by mail, sign in, key, token, forgot, reset ends the token", async () => {
  await using rig = await startPortalRig();
  const email = "dev@example.org";
  let response = await rig.api("POST", "/signup", { email, password: PASSWORD });
  assert.equal(response.status, 202);
  assert.equal((await json(response)).status, "accepted");
  const user = await rig.app.store.findUserByEmail(email);
  assert.equal(user?.disabled, true, "unusable until verified");
  assert.equal((await rig.app.store.findPortalAccount(user!.id))?.state, "pending_verification");

  const mail = await rig.smtp.waitFor(email, "Verify");
  const code = readCode(mail);
  assert.match(mail.body, /\/portal\/verify\?email=dev%40example\.org&code=/);
  const browser = rig.browser();
  response = await browser.call("POST", "/signin", { email, password: PASSWORD });
  assert.equal(response.status, 401, "no sign-in before verification");
  await response.body?.cancel();

  response = await rig.api("POST", "/verify", { email, code: "AAAAA-BBBBB", password: PASSWORD });
  assert.equal(response.status, 400);
  const refused = await json(response);
  assert.equal(refused.error.code, "invalid_request");
  response = await rig.api("POST", "/verify", { email, code, password: "not the one signed up" });
  assert.equal(response.status, 400, "the code alone does not verify");
  assert.deepEqual(await json(response), refused, "the same answer as a wrong code");
  assert.equal((await rig.app.store.findUserByEmail(email))?.disabled, true);
  // Verifying signs in: the answer opens a session, as sign-in does.
  response = await browser.call("POST", "/verify", {
    email,
    code: code.toLowerCase(),
    password: PASSWORD,
  });
  assert.equal(response.status, 200);
  const verified = await json(response);
  assert.equal(verified.state, "active");
  assert.match(verified.csrf_token, /^[A-Za-z0-9_-]{43}$/);
  browser.csrf = verified.csrf_token;
  assert.match(
    browser.cookie!,
    /^__Host-keygate_portal=[A-Za-z0-9_-]{43}$/,
  );
  response = await rig.api("POST", "/verify", { email, code, password: PASSWORD });
  assert.equal(response.status, 400, "a code works once");
  await response.body?.cancel();

  response = await browser.call("POST", "/keys", { label: "my app" });
  assert.equal(response.status, 201);
  const created = await json(response);
  assert.equal(created.key.label, "my app");
  assert.match(created.api_key, /^[0-9a-f-]{36}$/);
  assert.equal(
    rig.smtp.received.some((m) => m.raw.includes(created.api_key)),
    false,
    "never mailed",
  );

  const token = await issueToken(rig.app.handler, email, PASSWORD, created.api_key);
  response = await secureGet(
    rig.app.handler,
    "/api/secure/userservice/tokens/current",
    created.api_key,
    token,
  );
  assert.equal(response.status, 200);
  await response.body?.cancel();

  response = await browser.call("GET", "/tokens");
  const tokens = (await json(response)).tokens;
  assert.equal(tokens.length, 1);
  assert.equal(tokens[0].state, "live");

  response = await rig.api("POST", "/forgot", { email });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const reset = readCode(await rig.smtp.waitFor(email, "Reset"));
  response = await rig.api("POST", "/reset", { email, code: reset, password: NEW_PASSWORD });
  assert.equal(response.status, 200);
  assert.deepEqual(await json(response), { status: "password_changed", tokens_revoked: 1 });
  await rig.smtp.waitFor(email, "password was changed");

  response = await secureGet(
    rig.app.handler,
    "/api/secure/userservice/tokens/current",
    created.api_key,
    token,
  );
  assert.equal(response.status, 401, "the old token is refused");
  await response.body?.cancel();
  response = await browser.call("GET", "/keys");
  assert.equal(response.status, 401, "the reset ended the portal session");
  await response.body?.cancel();
  const actions = (await rig.app.store.listAudit()).map((r) => r.action);
  for (
    const action of [
      "portal.signed_up",
      "portal.code_failed",
      "portal.verified",
      "portal.signed_in",
      "key.created",
      "portal.reset_requested",
      "portal.password_reset",
    ]
  ) assert.ok(actions.includes(action), action);
});

Deno.test("[e2e] portal: a sign-up ahead of the owner cannot hijack the address (code + password)", async () => {
  await using rig = await startPortalRig();
  const email = "victim@example.org";
  const attacker = "attacker's own password";
  // The attacker signs the victim's address up first, with a password of their own.
  (await rig.api("POST", "/signup", { email, password: attacker })).body?.cancel();
  const first = readCode(await rig.smtp.waitFor(email, "Verify"));
  // The victim clicks the genuine mail: the code alone, with the victim's password, is refused.
  let response = await rig.api("POST", "/verify", { email, code: first, password: PASSWORD });
  assert.equal(response.status, 400);
  assert.equal((await json(response)).error.code, "invalid_request");
  assert.equal((await rig.app.store.findUserByEmail(email))?.disabled, true, "still unverified");
  // The victim signs up again: a second code bound to their password (the first stays bound
  // to the attacker's, which only the mailbox's owner could pair with it).
  (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
  const second = readCode(await rig.smtp.waitFor(email, "Verify", { skip: 1 }));
  assert.notEqual(second, first);
  response = await rig.api("POST", "/verify", { email, code: first, password: PASSWORD });
  assert.equal(response.status, 400, "the earlier code never takes the victim's password");
  await response.body?.cancel();
  response = await rig.api("POST", "/verify", { email, code: second, password: PASSWORD });
  assert.equal(response.status, 200, await response.clone().text());
  assert.equal((await json(response)).state, "active");
  response = await rig.api("POST", "/signin", { email, password: attacker });
  assert.equal(response.status, 401, "the attacker's password never signs in");
  await response.body?.cancel();
  await rig.browser().signIn(email, PASSWORD);
});

Deno.test("[e2e] portal: verifying never enables a user an operator disabled", async () => {
  await using rig = await startPortalRig();
  const email = "held@example.org";
  (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  let response = await rig.api("POST", "/verify", {
    email,
    code: "AAAAA-BBBBB",
    password: PASSWORD,
  });
  const wrongCode = await json(response);
  const user = (await rig.app.store.findUserByEmail(email))!;
  await rig.app.store.updateUserDisabled(user.id, {
    disabled: true,
    now: rig.app.clock.now(),
    audit: undefined,
  });
  response = await rig.api("POST", "/verify", { email, code, password: PASSWORD });
  assert.equal(response.status, 400);
  assert.equal(response.headers.get("set-cookie"), null);
  assert.deepEqual(await json(response), wrongCode, "the same answer as a wrong code");
  assert.equal((await rig.app.store.findUserByEmail(email))?.disabled, true, "still disabled");
  assert.equal((await rig.app.store.findPortalAccount(user.id))?.state, "pending_verification");
});

Deno.test("[e2e] portal: every mail goes out once, with its stored code", async () => {
  await using rig = await startPortalRig();
  const response = await rig.api("POST", "/signup", {
    email: "once@example.org",
    password: PASSWORD,
  });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const mail = await rig.smtp.waitFor("once@example.org", "Verify");
  // Marked sent (no sender takes it again) with no failed attempt: it went out once.
  await waitForSentMail(rig.app.store);
  assert.deepEqual(await rig.app.store.countMail(), {
    pending: 0,
    sent: 1,
    givenUp: 0,
    failedAttempts: 0,
  });
  assert.equal(rig.smtp.received.length, 1);
  // The code mailed is the stored one (its digest).
  const user = (await rig.app.store.findUserByEmail("once@example.org"))!;
  const stored = await rig.app.store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  assert.equal(stored.length, 1);
  assert.deepEqual(
    stored[0].codeHash,
    new Uint8Array(hashCode("once@example.org", readCode(mail), TEST_CODE_KEY)),
  );
});
