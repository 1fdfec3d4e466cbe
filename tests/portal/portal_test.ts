/**
 * The developer portal end to end over the real handler, the test store (both backends),
 * a real SMTP server and the real mailer: the whole path, the modes, CSRF and sessions, and
 * hostile input.
 *
 * @module
 */
import assert from "node:assert/strict";
import { afterExternalWrite } from "../_helpers/store.ts";
import { issueToken, secureGet } from "../_helpers/requests.ts";
import { runAdminProcess } from "../_helpers/admin_cli.ts";
import { readCode } from "./_smtp.ts";
import { ORIGIN, startPortalRig } from "./_portal.ts";

const PASSWORD = "correct horse battery";
const NEW_PASSWORD = "another long secret 42";

async function json(response: Response) {
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  return await response.json();
}

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
  await response.body?.cancel();
  await rig.smtp.waitFor("once@example.org", "Verify");
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(rig.smtp.received.length, 1);
  assert.equal(await rig.app.store.countQueuedMail(), 0);
});

Deno.test("[e2e] portal: sign-up, sign-in and forgot answer alike for known and unknown e-mails", async () => {
  await using rig = await startPortalRig();
  const known = "known@example.org";
  const response = await rig.api("POST", "/signup", { email: known, password: PASSWORD });
  await response.body?.cancel();
  const code = readCode(await rig.smtp.waitFor(known, "Verify"));
  (await rig.api("POST", "/verify", { email: known, code, password: PASSWORD })).body?.cancel();

  async function answer(method: string, path: string, body: unknown) {
    const r = await rig.api(method, path, body);
    const headers = [...r.headers].filter(([name]) => !["date", "x-request-id"].includes(name));
    return { status: r.status, headers, body: await r.text() };
  }
  for (
    const [path, body] of [
      ["/signup", (email: string) => ({ email, password: PASSWORD })],
      ["/signin", (email: string) => ({ email, password: "wrong password!" })],
      ["/forgot", (email: string) => ({ email })],
    ] as const
  ) {
    const a = await answer("POST", path, body(known));
    const b = await answer("POST", path, body("nobody@example.org"));
    assert.deepEqual(a, b, path);
    assert.ok(a.status === 202 || a.status === 401, `${path}: ${a.status}`);
  }
  // The known address learns by mail that someone tried to sign up.
  await rig.smtp.waitFor(known, "already have an account");
});

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

Deno.test("[e2e] portal: changes need the session's CSRF token and the portal's Origin", async () => {
  await using rig = await startPortalRig();
  const email = "csrf@example.org";
  (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  (await rig.api("POST", "/verify", { email, code, password: PASSWORD })).body?.cancel();
  const browser = rig.browser();
  await browser.signIn(email, PASSWORD);
  const cookie = browser.cookie!;
  let response = await rig.api("POST", "/keys", { label: "x" }, { cookie });
  assert.equal(response.status, 403);
  assert.equal((await json(response)).error.code, "csrf_failed");
  response = await rig.api("POST", "/keys", { label: "x" }, {
    cookie,
    "x-csrf-token": browser.csrf!,
    origin: "https://evil.example",
  });
  assert.equal(response.status, 403);
  await response.body?.cancel();
  response = await rig.app.handler(
    new Request(`${ORIGIN}/api/portal/v1/keys`, {
      method: "POST",
      headers: {
        cookie,
        "x-csrf-token": browser.csrf!,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: "label=x",
    }),
  );
  assert.equal(response.status, 415);
  await response.body?.cancel();
  assert.equal((await rig.app.store.listApiKeys()).length, 0, "no key made");
  response = await browser.call("POST", "/signout", {});
  assert.equal(response.status, 204);
  assert.match(response.headers.get("set-cookie")!, /Max-Age=0/);
  response = await rig.api("GET", "/keys", undefined, { cookie });
  assert.equal(response.status, 401, "signed out");
  await response.body?.cancel();
});

Deno.test("[e2e] portal: sessions expire", async () => {
  await using rig = await startPortalRig();
  const email = "expire@example.org";
  (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  (await rig.api("POST", "/verify", { email, code, password: PASSWORD })).body?.cancel();
  const browser = rig.browser();
  await browser.signIn(email, PASSWORD);
  let response = await browser.call("GET", "/session");
  assert.equal((await json(response)).email, email);
  rig.app.clock.advance(8 * 3_600_000);
  response = await browser.call("GET", "/session");
  assert.equal(response.status, 401);
  assert.equal((await json(response)).error.code, "not_signed_in");
});

Deno.test("[e2e] portal: hostile input gets 4xx JSON", async () => {
  await using rig = await startPortalRig();
  const cases: [Request, number][] = [
    [
      new Request(`${ORIGIN}/api/portal/v1/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{",
      }),
      400,
    ],
    [
      new Request(`${ORIGIN}/api/portal/v1/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"email":"a@b.org","password":"x","admin":true}',
      }),
      400,
    ],
    [
      new Request(`${ORIGIN}/api/portal/v1/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"email":"a@b.org","password":"password123"}',
      }),
      400,
    ],
    [
      new Request(`${ORIGIN}/api/portal/v1/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "a\u202e@b.org", password: PASSWORD }),
      }),
      400,
    ],
    [
      new Request(`${ORIGIN}/api/portal/v1/signin`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"email":1,"password":2}',
      }),
      400,
    ],
    [new Request(`${ORIGIN}/api/portal/v1/nothing`), 404],
    [new Request(`${ORIGIN}/api/portal/v1/signup`), 405],
    [
      new Request(`${ORIGIN}/api/portal/v1/keys/abc`, {
        method: "DELETE",
        headers: { cookie: "__Host-keygate_portal=x" },
      }),
      401,
    ],
    [
      new Request(`${ORIGIN}/api/portal/v1/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "x".repeat(20_000),
      }),
      413,
    ],
  ];
  for (const [request, status] of cases) {
    const response = await rig.app.handler(request);
    assert.equal(response.status, status, `${request.method} ${request.url}`);
    const body = await json(response);
    assert.equal(typeof body.error.code, "string");
  }
  assert.equal(await rig.app.store.countRows("users"), 0);
});

Deno.test("[e2e] GET /portal/ serves the page with a strict policy", async () => {
  await using rig = await startPortalRig();
  for (const path of ["/portal/", "/portal/verify?email=a%40b.org&code=X", "/portal/portal.js"]) {
    const response = await rig.app.handler(
      new Request(`${ORIGIN}${path}`, { headers: { accept: "text/html" } }),
    );
    assert.equal(response.status, 200, path);
    assert.match(response.headers.get("content-security-policy")!, /script-src 'self'/);
    assert.equal(response.headers.get("referrer-policy"), "no-referrer");
    await response.body?.cancel();
  }
});

Deno.test("[e2e] portal: mail links point to --portal-origin, never to the request's Host", async () => {
  await using rig = await startPortalRig();
  const email = "host@example.org";
  const evil = { host: "evil.example" };
  let response = await rig.api("POST", "/signup", { email, password: PASSWORD }, evil);
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const verify = await rig.smtp.waitFor(email, "Verify");
  assert.doesNotMatch(verify.body, /evil\.example/);
  assert.ok(verify.body.includes(`${ORIGIN}/portal/verify?`), verify.body);
  (await rig.api("POST", "/verify", { email, code: readCode(verify), password: PASSWORD }))
    .body?.cancel();
  response = await rig.api("POST", "/forgot", { email }, evil);
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const reset = await rig.smtp.waitFor(email, "Reset");
  assert.doesNotMatch(reset.body, /evil\.example/);
  assert.ok(reset.body.includes(`${ORIGIN}/portal/reset?`), reset.body);
  // The Origin check compares with --portal-origin too, not with the Host.
  response = await rig.api("POST", "/forgot", { email }, {
    ...evil,
    origin: "https://evil.example",
  });
  assert.equal(response.status, 403);
  assert.equal((await json(response)).error.code, "forbidden");
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
  assert.equal(await rig.app.store.countQueuedMail(), 0);
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

Deno.test("[e2e] portal: a password change ends the other sessions, not the one it was made in", async () => {
  await using rig = await startPortalRig();
  const email = "change@example.org";
  (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  (await rig.api("POST", "/verify", { email, code, password: PASSWORD })).body?.cancel();
  const here = rig.browser();
  const elsewhere = rig.browser();
  await here.signIn(email, PASSWORD);
  await elsewhere.signIn(email, PASSWORD);
  let response = await here.call("POST", "/password", {
    current_password: PASSWORD,
    password: NEW_PASSWORD,
  });
  assert.equal(response.status, 200);
  assert.deepEqual(await json(response), { status: "password_changed", tokens_revoked: 0 });
  response = await here.call("GET", "/session");
  assert.equal((await json(response)).email, email, "the session it was made in stays");
  response = await elsewhere.call("GET", "/session");
  assert.equal(response.status, 401, "every other session ends");
  assert.equal((await json(response)).error.code, "not_signed_in");
});
