/**
 * A signed-in portal user's own account end to end (real handler, test store on both
 * backends, real SMTP server and mailer): change e-mail, change password with its notice,
 * label a key, delete the account.
 *
 * @module
 */
import assert from "node:assert/strict";
import { issueToken, secureGet } from "../_helpers/requests.ts";
import { PORTAL_THROTTLE_RULES } from "../../src/auth/portal/portal_throttle.ts";
import { readCode } from "./_smtp.ts";
import { activeUser, startPortalRig } from "./_portal.ts";
import { json, NEW_PASSWORD, PASSWORD } from "./_portal_answers.ts";

/** An active account, signed in. */
Deno.test("[e2e] POST /api/portal/v1/email moves the account only once the new address confirms", async () => {
  await using rig = await startPortalRig();
  const browser = await activeUser(rig, "old@example.org");
  const user = (await rig.app.store.findUserByEmail("old@example.org"))!;

  let response = await browser.call("POST", "/email", {
    email: "new@example.org",
    password: "wrong password!",
  });
  assert.equal(response.status, 401);
  assert.equal((await json(response)).error.code, "invalid_credentials");

  response = await browser.call("POST", "/email", {
    email: "New@Example.org",
    password: PASSWORD,
  });
  assert.equal(response.status, 202);
  assert.equal((await json(response)).status, "accepted");
  assert.equal((await rig.app.store.findUserById(user.id))?.email, "old@example.org", "not yet");
  const mail = await rig.smtp.waitFor("new@example.org", "Confirm your new e-mail");
  assert.match(mail.body, /\/portal\/email\?email=new%40example\.org&code=/);
  const code = readCode(mail);

  response = await browser.call("POST", "/email/confirm", { code: "AAAAA-BBBBB" });
  assert.equal(response.status, 400);
  assert.equal((await json(response)).error.code, "invalid_request");
  response = await rig.browser().call("POST", "/email/confirm", { code });
  assert.equal(response.status, 401, "signed in only");
  await response.body?.cancel();
  response = await browser.call("POST", "/email/confirm", { code });
  assert.equal(response.status, 200);
  assert.deepEqual(await json(response), { status: "email_changed", email: "new@example.org" });
  assert.equal((await rig.app.store.findUserById(user.id))?.email, "new@example.org");
  const notice = await rig.smtp.waitFor("old@example.org", "e-mail address was changed");
  assert.match(notice.body, /to new@example\.org/);
  response = await browser.call("POST", "/email/confirm", { code });
  assert.equal(response.status, 400, "a code works once");
  await response.body?.cancel();
  const actions = (await rig.app.store.listAudit()).map((r) => r.action);
  assert.ok(actions.includes("portal.email_change_requested"));
  assert.ok(actions.includes("portal.email_changed"));
  assert.ok(actions.includes("portal.code_failed"));
  await rig.browser().signIn("new@example.org", PASSWORD);
});

Deno.test("[e2e] POST /api/portal/v1/email answers alike for a taken address and mails nobody", async () => {
  await using rig = await startPortalRig();
  const browser = await activeUser(rig, "mover@example.org");
  await activeUser(rig, "taken@example.org");
  const outbox = async () =>
    (await rig.app.querySql("SELECT recipient FROM mail_outbox ORDER BY id")).map((row) =>
      row.recipient as string
    );
  const before = (await outbox()).length;

  async function answer(email: string) {
    const r = await browser.call("POST", "/email", { email, password: PASSWORD });
    const headers = [...r.headers].filter(([name]) => !["date", "x-request-id"].includes(name));
    return { status: r.status, headers, body: await r.text() };
  }
  const taken = await answer("taken@example.org");
  const free = await answer("free@example.org");
  assert.deepEqual(taken, free);
  assert.equal(taken.status, 202);
  // A change queues its mail in its own transaction, before it answers: the outbox is complete
  // now (a wait for what the mailer sends would pass a late message unseen).
  assert.deepEqual((await outbox()).slice(before), ["free@example.org"], "nothing to the taken");
  await rig.smtp.waitFor("free@example.org", "Confirm your new e-mail");
  const user = (await rig.app.store.findUserByEmail("mover@example.org"))!;
  const pending = await rig.app.store.findPortalCode(user.id, "email", rig.app.clock.now());
  assert.equal(pending?.newEmail, "free@example.org");
});

Deno.test("[e2e] POST /api/portal/v1/password mails a notice, ends tokens and other sessions", async () => {
  await using rig = await startPortalRig();
  const email = "pw@example.org";
  const browser = await activeUser(rig, email);
  const other = rig.browser();
  await other.signIn(email, PASSWORD);
  const created = await json(await browser.call("POST", "/keys", { label: "app" }));
  const token = await issueToken(rig.app.handler, email, PASSWORD, created.api_key);

  let response = await browser.call("POST", "/password", {
    current_password: PASSWORD,
    password: NEW_PASSWORD,
  });
  assert.equal(response.status, 200);
  assert.deepEqual(await json(response), { status: "password_changed", tokens_revoked: 1 });
  await rig.smtp.waitFor(email, "password was changed");
  response = await secureGet(
    rig.app.handler,
    "/api/secure/userservice/tokens/current",
    created.api_key,
    token,
  );
  assert.equal(response.status, 401, "the token ended");
  await response.body?.cancel();
  response = await browser.call("GET", "/keys");
  assert.equal(response.status, 200, "this session stays");
  await response.body?.cancel();
  response = await other.call("GET", "/keys");
  assert.equal(response.status, 401, "the other session ended");
  await response.body?.cancel();
  assert.ok(
    (await rig.app.store.listAudit()).some((r) => r.action === "portal.password_changed"),
  );
});

Deno.test("[e2e] PATCH /api/portal/v1/keys/:id labels the user's own key only", async () => {
  await using rig = await startPortalRig();
  const browser = await activeUser(rig, "label@example.org");
  const stranger = await activeUser(rig, "stranger@example.org");
  const created = await json(await browser.call("POST", "/keys", { label: "first" }));
  let response = await browser.call("PATCH", `/keys/${created.key.id}`, { label: "ci runner" });
  assert.equal(response.status, 200);
  assert.deepEqual(await json(response), { status: "labelled", id: created.key.id });
  assert.equal((await rig.app.store.findApiKeyById(created.key.id))?.label, "ci runner");

  response = await browser.call("PATCH", `/keys/${created.key.id}`, { label: "bad\u202elabel" });
  assert.equal(response.status, 400);
  assert.match((await json(response)).error.message, /bidirectional/);
  response = await stranger.call("PATCH", `/keys/${created.key.id}`, { label: "mine" });
  assert.equal(response.status, 404);
  await response.body?.cancel();
  response = await browser.call("PATCH", `/keys/${created.key.id}`, { label: 7 });
  assert.equal(response.status, 400);
  await response.body?.cancel();
  const csrfless = rig.browser();
  csrfless.cookie = browser.cookie;
  response = await csrfless.call("PATCH", `/keys/${created.key.id}`, { label: "x" });
  assert.equal(response.status, 403);
  await response.body?.cancel();
  assert.equal((await rig.app.store.findApiKeyById(created.key.id))?.label, "ci runner");
  assert.ok((await rig.app.store.listAudit()).some((r) => r.action === "portal.key_labelled"));
});

Deno.test("[e2e] POST /api/portal/v1/account/delete deletes user, keys and tokens; the audit keeps no e-mail", async () => {
  await using rig = await startPortalRig();
  const email = "gone@example.org";
  const browser = await activeUser(rig, email);
  const user = (await rig.app.store.findUserByEmail(email))!;
  const created = await json(await browser.call("POST", "/keys", { label: "app" }));
  const token = await issueToken(rig.app.handler, email, PASSWORD, created.api_key);
  let response = await secureGet(
    rig.app.handler,
    "/api/secure/userservice/tokens/current",
    created.api_key,
    token,
  );
  assert.equal(response.status, 200, "cached grant");
  await response.body?.cancel();

  const csrfless = rig.browser();
  csrfless.cookie = browser.cookie;
  response = await csrfless.call("POST", "/account/delete", { password: PASSWORD });
  assert.equal(response.status, 403, "CSRF token needed");
  await response.body?.cancel();
  response = await browser.call("POST", "/account/delete", { password: "wrong password!" });
  assert.equal(response.status, 401);
  await response.body?.cancel();
  assert.notEqual(await rig.app.store.findUserById(user.id), undefined);

  response = await browser.call("POST", "/account/delete", { password: PASSWORD });
  assert.equal(response.status, 200);
  assert.match(response.headers.get("set-cookie") ?? "", /^__Host-keygate_portal=; .*Max-Age=0/);
  assert.deepEqual(await json(response), {
    status: "deleted",
    api_keys_deleted: 1,
    tokens_deleted: 1,
  });
  assert.equal(await rig.app.store.findUserById(user.id), undefined);
  assert.equal(await rig.app.store.findApiKeyById(created.key.id), undefined);
  assert.equal(await rig.app.store.findPortalAccount(user.id), undefined);
  response = await secureGet(
    rig.app.handler,
    "/api/secure/userservice/tokens/current",
    created.api_key,
    token,
  );
  assert.equal(response.status, 401, "the cached grant is gone");
  await response.body?.cancel();
  response = await browser.call("GET", "/keys");
  assert.equal(response.status, 401, "the session ended");
  await response.body?.cancel();
  const deleted = (await rig.app.store.listAudit()).find((r) =>
    r.action === "portal.account_deleted"
  );
  assert.match(deleted?.subject ?? "", /^user:deleted:[A-Za-z0-9_-]{16}$/);
  assert.equal(JSON.stringify(deleted).includes(email), false);
});

Deno.test("[e2e] POST /api/portal/v1/email takes one plain mailbox, and in domains mode an allowed domain only", async () => {
  await using rig = await startPortalRig({ mode: "domains", domains: ["corp.example"] });
  const browser = await activeUser(rig, "dev@corp.example");
  const user = (await rig.app.store.findUserByEmail("dev@corp.example"))!;
  for (const email of ["a@evil.test,b@corp.example", "<x@corp.example>", "x@corp.example>"]) {
    const response = await browser.call("POST", "/email", { email, password: PASSWORD });
    assert.equal(response.status, 400, email);
    assert.equal((await json(response)).error.code, "invalid_request");
  }
  const outside = await browser.call("POST", "/email", {
    email: "me@evil.test",
    password: PASSWORD,
  });
  assert.equal(outside.status, 403);
  assert.equal((await json(outside)).error.code, "forbidden");
  assert.equal((await rig.app.store.findUserById(user.id))?.email, "dev@corp.example");
  const codes = await rig.app.querySql(
    "SELECT count(*) AS n FROM portal_codes WHERE purpose = 'email'",
  );
  assert.equal(Number(codes[0].n), 0, "no code was made for a refused address");
});

Deno.test("[e2e] portal: wrong current passwords count against the sign-in throttle", async () => {
  await using rig = await startPortalRig({
    throttleRules: {
      ...PORTAL_THROTTLE_RULES,
      signIn: { threshold: 2, baseDelayMs: 60_000, maxDelayMs: 60_000, windowMs: 3_600_000 },
    },
  });
  const email = "guess@example.org";
  const browser = await activeUser(rig, email);
  for (const password of ["wrong password 1", "wrong password 2"]) {
    const response = await browser.call("POST", "/password", {
      current_password: password,
      password: NEW_PASSWORD,
    });
    assert.equal(response.status, 401);
    assert.equal((await json(response)).error.code, "invalid_credentials");
  }
  // Blocked now, whatever is sent: the right password too, on every path that asks for it.
  for (
    const [path, body] of [
      ["/password", { current_password: PASSWORD, password: NEW_PASSWORD }],
      ["/account/delete", { password: PASSWORD }],
      ["/email", { email: "elsewhere@example.org", password: PASSWORD }],
    ] as const
  ) {
    const response = await browser.call("POST", path, body);
    assert.equal(response.status, 429, path);
    assert.ok(Number(response.headers.get("retry-after")) > 0, path);
    assert.equal((await json(response)).error.code, "too_many_attempts", path);
  }
  // The same counters as sign-in: a sign-in to the account waits too.
  const response = await rig.api("POST", "/signin", { email, password: PASSWORD });
  assert.equal(response.status, 429);
  await response.body?.cancel();
  const user = await rig.app.store.findUserByEmail(email);
  assert.ok(user !== undefined, "not deleted");
  // Once the delay has passed, the right password works.
  rig.app.clock.advance(61_000);
  const changed = await browser.call("POST", "/password", {
    current_password: PASSWORD,
    password: NEW_PASSWORD,
  });
  assert.equal(changed.status, 200, await changed.clone().text());
  await changed.body?.cancel();
});

Deno.test("[e2e] POST /api/portal/v1/keys: concurrent creates never pass the cap of 20 keys", async () => {
  await using rig = await startPortalRig();
  const email = "many@example.org";
  const browser = await activeUser(rig, email);
  const answers = await Promise.all(
    Array.from({ length: 26 }, (_, i) => browser.call("POST", "/keys", { label: `k${i}` })),
  );
  const statuses = answers.map((r) => r.status).sort();
  for (const r of answers) await r.body?.cancel();
  assert.equal(statuses.filter((s) => s === 201).length, 20);
  assert.equal(statuses.filter((s) => s === 409).length, 6);
  const user = (await rig.app.store.findUserByEmail(email))!;
  assert.equal((await rig.app.store.listApiKeys(user.id)).length, 20);
  const refused = await browser.call("POST", "/keys", { label: "one more" });
  assert.equal(refused.status, 409);
  assert.equal((await json(refused)).error.code, "conflict");
});
