/**
 * The rules of enrolment apply to what they allowed earlier (issue 25, review 3): a session
 * opened, or a reset code mailed, while `--portal-existing-users` was on, or while a domain was
 * allowed, stops working once the rule is gone. Real handlers (before and after the change of
 * settings) over one test store (both backends), a real SMTP server and mailer.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { SignUpMode } from "../../src/auth/portal/account_deps.ts";
import { createPortalThrottle } from "../../src/auth/portal/portal_throttle.ts";
import { createHandler } from "../../src/http/app.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { readCode } from "./_smtp.ts";
import {
  ORIGIN,
  type PortalRig,
  startPortalRig,
  TEST_CODE_KEY,
  verifiedAccount,
} from "./_portal.ts";
import { assertError, NEW_PASSWORD, PASSWORD } from "./_portal_answers.ts";

/** The rig's store and clock behind a handler with other portal settings (a restart). */
function restarted(
  rig: PortalRig,
  settings: { mode: SignUpMode; domains?: string[]; existingUsers: boolean },
) {
  const handler = createHandler({
    store: rig.app.store,
    hasher: createPasswordHasher(),
    clock: rig.app.clock,
    logger: silentLogger,
    defaultTimeoutSeconds: 36000,
    portal: {
      throttle: createPortalThrottle({
        store: rig.app.store,
        clock: rig.app.clock,
        key: TEST_CODE_KEY,
      }),
      ...settings,
      codeKey: TEST_CODE_KEY,
      origin: ORIGIN,
    },
  });
  return (path: string, body?: unknown, cookie?: string) =>
    handler(
      new Request(`${ORIGIN}/api/portal/v1${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: {
          origin: ORIGIN,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...(cookie === undefined ? {} : { cookie }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
}

/** `later` refuses the session and the reset code, and nothing was changed. */
async function assertRefused(
  rig: PortalRig,
  later: ReturnType<typeof restarted>,
  held: { email: string; cookie: string; code: string },
) {
  const { email, cookie, code } = held;
  await assertError(await later("/session", undefined, cookie), 401, "not_signed_in");
  await assertError(
    await later("/reset", { email, code, password: NEW_PASSWORD }),
    400,
    "invalid_request",
  );
  const user = (await rig.app.store.findUserByEmail(email))!;
  const live = await rig.app.store.findPortalCodes(user.id, "reset", rig.app.clock.now());
  assert.equal(live.length, 1, "the code was not spent");
  const audit = await rig.app.store.listAudit();
  assert.ok(!audit.some((row) => row.action === "portal.password_reset"), "no reset");
}

/** Signs in with `browser`, asks a reset code, and returns the session cookie and the code. */
async function sessionAndResetCode(rig: PortalRig, email: string) {
  const browser = rig.browser();
  await browser.signIn(email, PASSWORD);
  let response = await browser.call("GET", "/session");
  assert.equal(response.status, 200);
  await response.body?.cancel();
  response = await rig.api("POST", "/forgot", { email });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Reset your password"));
  return { cookie: browser.cookie!, code };
}

Deno.test("[e2e] --portal-existing-users turned off ends an operator's user's session and reset code", async () => {
  await using rig = await startPortalRig({ existingUsers: true });
  const email = "operator-made@example.org";
  await rig.app.addUser(email, PASSWORD);
  const { cookie, code } = await sessionAndResetCode(rig, email);
  const later = restarted(rig, { mode: "open", existingUsers: false });
  await assertRefused(rig, later, { email, cookie, code });
  // Back on, both work again: nothing was changed meanwhile.
  const again = restarted(rig, { mode: "open", existingUsers: true });
  const response = await again("/session", undefined, cookie);
  assert.equal(response.status, 200);
  assert.equal((await response.json()).email, email);
});

Deno.test("[e2e] a domain removed ends its accounts' sessions and reset codes", async () => {
  await using rig = await startPortalRig({ mode: "domains", domains: ["example.org"] });
  const email = "member@example.org";
  await verifiedAccount(rig, email);
  const { cookie, code } = await sessionAndResetCode(rig, email);
  const later = restarted(rig, { mode: "domains", domains: ["example.com"], existingUsers: false });
  await assertRefused(rig, later, { email, cookie, code });
});
