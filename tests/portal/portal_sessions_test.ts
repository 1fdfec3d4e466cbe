/**
 * The developer portal's sessions end to end: changes need the session's CSRF token and the
 * portal's Origin, sign-out, expiry, and a password change that ends the other sessions.
 *
 * @module
 */
import assert from "node:assert/strict";
import { activeUser, ORIGIN, startPortalRig, verifiedAccount } from "./_portal.ts";
import { json, NEW_PASSWORD, PASSWORD } from "./_portal_answers.ts";

Deno.test("[e2e] portal: changes need the session's CSRF token and the portal's Origin", async () => {
  await using rig = await startPortalRig();
  const email = "csrf@example.org";
  const browser = await activeUser(rig, email);
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
  const browser = await activeUser(rig, email);
  let response = await browser.call("GET", "/session");
  assert.equal((await json(response)).email, email);
  rig.app.clock.advance(8 * 3_600_000);
  response = await browser.call("GET", "/session");
  assert.equal(response.status, 401);
  assert.equal((await json(response)).error.code, "not_signed_in");
});

Deno.test("[e2e] portal: a password change ends the other sessions, not the one it was made in", async () => {
  await using rig = await startPortalRig();
  const email = "change@example.org";
  await verifiedAccount(rig, email);
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

/** A `Set-Cookie` value: its name, value and attributes (names lower-cased). */
function parseSetCookie(header: string | null) {
  assert.ok(header !== null, "a Set-Cookie header");
  assert.ok(!header.includes(","), "one cookie");
  const [pair, ...parts] = header.split(";").map((part) => part.trim());
  const eq = pair.indexOf("=");
  const attributes = new Map<string, string>();
  for (const part of parts) {
    const at = part.indexOf("=");
    const name = (at < 0 ? part : part.slice(0, at)).toLowerCase();
    assert.ok(!attributes.has(name), `${name} once`);
    attributes.set(name, at < 0 ? "" : part.slice(at + 1));
  }
  return { name: pair.slice(0, eq), value: pair.slice(eq + 1), attributes };
}

/** The attributes a browser needs to keep a `__Host-` cookie on HTTPS only and this site only. */
function assertHostCookie(cookie: ReturnType<typeof parseSetCookie>, maxAge: string) {
  assert.equal(cookie.name, "__Host-keygate_portal");
  assert.deepEqual(
    [...cookie.attributes].sort(),
    [["httponly", ""], ["max-age", maxAge], ["path", "/"], ["samesite", "Strict"], ["secure", ""]],
    "Secure, HttpOnly, SameSite=Strict, Path=/, Max-Age, and no Domain or other attribute",
  );
}

Deno.test("[e2e] portal: the session cookie is __Host-, Secure, HttpOnly, SameSite=Strict, Path=/; sign-out clears it", async () => {
  await using rig = await startPortalRig();
  const email = "cookie@example.org";
  await verifiedAccount(rig, email);
  const signIn = await rig.api("POST", "/signin", { email, password: PASSWORD });
  assert.equal(signIn.status, 200);
  const body = await json(signIn);
  const session = parseSetCookie(signIn.headers.get("set-cookie"));
  assertHostCookie(session, String(8 * 3600));
  assert.match(session.value, /^[A-Za-z0-9_-]{32,}$/, "an unguessable id");
  assert.equal(Date.parse(body.expires_at), rig.app.clock.now() + 8 * 3_600_000);
  assert.ok(!JSON.stringify(body).includes(session.value), "the id only in the cookie");
  const cookie = `${session.name}=${session.value}`;

  let response = await rig.api("GET", "/session", undefined, { cookie });
  assert.equal((await json(response)).email, email);
  response = await rig.api("POST", "/signout", {}, { cookie, "x-csrf-token": body.csrf_token });
  assert.equal(response.status, 204);
  const cleared = parseSetCookie(response.headers.get("set-cookie"));
  assertHostCookie(cleared, "0");
  assert.equal(cleared.value, "", "the cookie's value emptied");
  response = await rig.api("GET", "/session", undefined, { cookie });
  assert.equal(response.status, 401, "the old cookie no longer signs in");
  assert.equal((await json(response)).error.code, "not_signed_in");
});
