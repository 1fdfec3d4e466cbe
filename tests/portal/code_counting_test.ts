/**
 * One code check and one password step (issue 25's review): a wrong code at a change of
 * address counts on the code counters (the client's and the e-mail × network one) and against
 * the live code, never on sign-in's per-e-mail ceiling; a signed-in user's current-password
 * check is sign-in's own step, with its size rule and the client's abort signal.
 *
 * @module
 */
import assert from "node:assert/strict";
import { AuthError } from "../../src/auth/errors.ts";
import { deleteOwnAccount } from "../../src/auth/portal/own_account.ts";
import { createPortalThrottle } from "../../src/auth/portal/portal_throttle.ts";
import { MAX_CODE_ATTEMPTS } from "../../src/auth/portal/codes.ts";
import { readCode } from "./_smtp.ts";
import { hasher, ORIGIN, type PortalRig, startPortalRig, TEST_CODE_KEY } from "./_portal.ts";

const PASSWORD = "correct horse battery";

/** An active account, signed in (its sign-in leaves no failure counted). */
async function activeUser(rig: PortalRig, email: string) {
  (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  (await rig.api("POST", "/verify", { email, code, password: PASSWORD })).body?.cancel();
  const browser = rig.browser();
  await browser.signIn(email, PASSWORD);
  return browser;
}

async function failuresBySubject(rig: PortalRig) {
  const rows = await rig.app.store.listLoginFailures(rig.app.clock.now());
  const prefixes = ["portal-client:", "portal-login:", "portal-login-all:"];
  return Object.fromEntries(
    prefixes.map((prefix) => [
      prefix,
      rows.filter((row) => row.subject.startsWith(prefix)).map((row) => row.failures),
    ]),
  );
}

Deno.test("[e2e] POST /api/portal/v1/email/confirm counts a wrong code on the code counters and against the code, never on the sign-in ceiling", async () => {
  await using rig = await startPortalRig();
  const browser = await activeUser(rig, "mover@example.org");
  const user = (await rig.app.store.findUserByEmail("mover@example.org"))!;
  const asked = await browser.call("POST", "/email", {
    email: "moved@example.org",
    password: PASSWORD,
  });
  assert.equal(asked.status, 202);
  await asked.body?.cancel();
  const code = readCode(await rig.smtp.waitFor("moved@example.org", "Confirm your new e-mail"));
  const wrong = code.startsWith("A") ? "BBBBB-BBBBB" : "AAAAA-AAAAA";
  for (let i = 1; i <= MAX_CODE_ATTEMPTS; i++) {
    const response = await browser.call("POST", "/email/confirm", { code: wrong });
    assert.equal(response.status, 400);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    assert.deepEqual(await response.json(), {
      error: { code: "invalid_request", message: "Invalid or expired code: ask for a new one" },
    });
  }
  assert.deepEqual(await failuresBySubject(rig), {
    // The client's counter also counts the mail asked for (the sign-up, the change).
    "portal-client:": [MAX_CODE_ATTEMPTS + 2],
    "portal-login:": [MAX_CODE_ATTEMPTS],
    "portal-login-all:": [],
  });
  // Counted against the code too: after its last wrong try, the right one no longer works.
  const [stored] = await rig.app.store.findPortalCodes(user.id, "email", rig.app.clock.now());
  assert.equal(stored.attempts, MAX_CODE_ATTEMPTS);
  const late = await browser.call("POST", "/email/confirm", { code });
  assert.equal(late.status, 400);
  await late.body?.cancel();
  assert.equal((await rig.app.store.findUserById(user.id))?.email, "mover@example.org");
  const failed = (await rig.app.store.listAudit()).filter((row) =>
    row.action === "portal.code_failed"
  );
  assert.equal(failed.length, MAX_CODE_ATTEMPTS + 1, "each wrong try, the dead code's too");
  assert.deepEqual(failed.map((row) => [row.actor, row.detail.purpose])[0], [
    `portal:user:${user.id}`,
    "email",
  ]);
});

Deno.test("[e2e] a current password over the size limit is a failed sign-in, counted as one", async () => {
  await using rig = await startPortalRig();
  const browser = await activeUser(rig, "sized@example.org");
  const response = await browser.call("POST", "/password", {
    current_password: "x".repeat(1025),
    password: "another long secret 42",
  });
  assert.equal(response.status, 401);
  assert.deepEqual(await response.json(), {
    error: { code: "invalid_credentials", message: "The current password is wrong" },
  });
  assert.deepEqual(await failuresBySubject(rig), {
    "portal-client:": [2], // and the sign-up's mail
    "portal-login:": [1],
    "portal-login-all:": [1],
  });
});

Deno.test("deleteOwnAccount() stops at the client's abort signal: request_aborted, nothing deleted or counted", async () => {
  await using rig = await startPortalRig();
  await activeUser(rig, "gone@example.org");
  const store = rig.app.store;
  const user = (await store.findUserByEmail("gone@example.org"))!;
  const deps = {
    store,
    clock: rig.app.clock,
    hasher,
    throttle: createPortalThrottle({ store, clock: rig.app.clock, key: TEST_CODE_KEY }),
    codeKey: TEST_CODE_KEY,
  };
  const client = { address: "192.0.2.5", links: { origin: ORIGIN }, signal: AbortSignal.abort() };
  const before = await failuresBySubject(rig);
  await assert.rejects(
    deleteOwnAccount(deps, client, user, { password: PASSWORD }),
    (error: unknown) => error instanceof AuthError && error.code === "request_aborted",
  );
  assert.ok(await store.findUserById(user.id), "not deleted");
  assert.deepEqual(await failuresBySubject(rig), before, "nothing counted");
});
