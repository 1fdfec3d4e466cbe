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
