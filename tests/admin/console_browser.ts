/**
 * The web console in headless Chromium (Debian's `chromium`, driven by
 * playwright-core): the real admin and API handlers over real TLS, an
 * operator signing in with the keyboard, creating a user and a key (shown
 * once, then only its prefix), rotating it, revoking a token (the next
 * secure request with it is refused), filtering the audit log, approving and
 * refusing portal sign-ups, and a read-only operator who sees no write button
 * and gets 403 from the API. No page may log an error or a
 * Content-Security-Policy violation.
 *
 * The harness is _console_rig.ts; the steps, in order, are in
 * console_browser_users.ts, console_browser_pages.ts, console_browser_portal.ts
 * and console_browser_safety.ts (they hand on the page and what they made).
 *
 * Screenshots go to a temporary folder; with KEYGATE_SCREENSHOTS=docs/console
 * they replace the ones in the docs.
 *
 * Not a `_test.ts` file: playwright-core reads /proc at load time, which Deno
 * allows only with --allow-all, so console_test.ts runs this file in a
 * `deno test --allow-all` process of its own, and the rest of the suite keeps
 * its narrower permissions.
 */
import { hasChromium, inCi, startConsoleRig, watchErrors } from "./_console_rig.ts";
import { runPageSteps } from "./console_browser_pages.ts";
import { runPortalSteps } from "./console_browser_portal.ts";
import { runSafetySteps } from "./console_browser_safety.ts";
import { runUserSteps } from "./console_browser_users.ts";

Deno.test({
  name: "[console] an operator manages users, keys and tokens in Chromium; a reader cannot",
  ignore: !hasChromium && !inCi,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const shots = Deno.env.get("KEYGATE_SCREENSHOTS") ??
      await Deno.makeTempDir({ prefix: "keygate-shots-" });
    await Deno.mkdir(shots, { recursive: true });
    await using rig = await startConsoleRig();
    const page = await rig.browser.context.newPage();
    const run = { t, rig, page, errors: watchErrors(page), shots, email: "", apiKey: "" };
    await runUserSteps(run);
    await runPageSteps(run);
    await runPortalSteps(run);
    await runSafetySteps(run);
  },
});
