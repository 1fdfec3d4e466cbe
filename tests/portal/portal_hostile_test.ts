/**
 * The developer portal against a prober or an attacker, end to end: known and unknown
 * addresses answered alike, hostile input answered 4xx in JSON, the page's strict policy, and
 * mail links that never follow the request's Host.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readCode } from "./_smtp.ts";
import { ORIGIN, startPortalRig } from "./_portal.ts";
import { json, PASSWORD } from "./_portal_answers.ts";

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
  // As Deno.serve builds it from the Host: the request's own URL names the evil host.
  const post = (path: string, body: unknown) =>
    rig.app.handler(
      new Request(`https://evil.example/api/portal/v1${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: ORIGIN, ...evil },
        body: JSON.stringify(body),
      }),
    );
  let response = await post("/signup", { email, password: PASSWORD });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const verify = await rig.smtp.waitFor(email, "Verify");
  assert.doesNotMatch(verify.body, /evil\.example/);
  assert.ok(verify.body.includes(`${ORIGIN}/portal/verify?`), verify.body);
  (await rig.api("POST", "/verify", { email, code: readCode(verify), password: PASSWORD }))
    .body?.cancel();
  response = await post("/forgot", { email });
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
