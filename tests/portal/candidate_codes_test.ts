/**
 * A stranger cannot keep a pending address from being verified (issue 25, review 3): wrong
 * codes count on the throttle, never against the owner's candidate; strangers' sign-ups push
 * out only their own network's candidates; the mail counter the owner's re-sign-up meets is
 * their own network's; and a first sign-up that loses a race still gets its code. Real handler,
 * test store (both backends), real SMTP server and mailer.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readCode } from "./_smtp.ts";
import { ORIGIN, type PortalRig, startPortalRig } from "./_portal.ts";

const OWNER_PASSWORD = "correct horse battery";
const STRANGER_PASSWORD = "stranger danger 12345";
const OWNER = "198.51.100.7";

/** A request from `address`, as the listener would hand it over. */
async function from(rig: PortalRig, address: string, path: string, body: unknown) {
  const response = await rig.app.handler(
    new Request(`${ORIGIN}/api/portal/v1${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ORIGIN },
      body: JSON.stringify(body),
    }),
    { remoteAddr: { hostname: address } },
  );
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  return {
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    body: await response.json(),
  };
}

Deno.test("[e2e] five wrong codes from a stranger do not end the owner's verification code", async () => {
  await using rig = await startPortalRig();
  const email = "owner@example.org";
  let answer = await from(rig, OWNER, "/signup", { email, password: OWNER_PASSWORD });
  assert.equal(answer.status, 202);
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  for (let i = 0; i < 5; i++) {
    answer = await from(rig, "203.0.113.9", "/verify", {
      email,
      code: "AAAAA-AAAAA",
      password: STRANGER_PASSWORD,
    });
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error.code, "invalid_request");
  }
  const user = (await rig.app.store.findUserByEmail(email))!;
  const live = await rig.app.store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  assert.deepEqual(live.map((stored) => stored.attempts), [0], "the guesses count on no code");
  const failed = (await rig.app.store.listAudit()).filter((row) =>
    row.action === "portal.code_failed"
  );
  assert.equal(failed.length, 5, "each guess is still audited");
  answer = await from(rig, OWNER, "/verify", { email, code, password: OWNER_PASSWORD });
  assert.equal(answer.status, 200);
  assert.equal(answer.body.state, "active");
});

Deno.test("[e2e] a right code with a wrong password still counts against that code", async () => {
  await using rig = await startPortalRig();
  const email = "owner@example.org";
  assert.equal(
    (await from(rig, OWNER, "/signup", { email, password: OWNER_PASSWORD })).status,
    202,
  );
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  const answer = await from(rig, OWNER, "/verify", { email, code, password: STRANGER_PASSWORD });
  assert.equal(answer.status, 400);
  const user = (await rig.app.store.findUserByEmail(email))!;
  const live = await rig.app.store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  assert.deepEqual(live.map((stored) => stored.attempts), [1]);
});
