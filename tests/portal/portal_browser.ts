/**
 * The developer portal in headless Chromium (Debian's `chromium`, driven by playwright-core),
 * over the real handler on real TLS, a real SMTP server and the real mailer: a developer signs
 * up, reads the mail, verifies through the link's page (which needs a click: a POST), signs in,
 * creates a key (shown once), gets a token from POST /api/userservice/tokens with it, makes a
 * secure request, forgets the password, reads the mail, sets a new password, and the old
 * token is refused. No page may log an error or a Content-Security-Policy violation.
 *
 * Screenshots go to a temporary folder; with KEYGATE_SCREENSHOTS=docs/images they replace
 * the ones in the docs.
 *
 * Not a `_test.ts` file: playwright-core needs --allow-all, so portal_browser_test.ts runs
 * this file in a `deno test --allow-all` process of its own.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chromium, type Page } from "playwright-core";
import { createPortalThrottle } from "../../src/auth/portal/portal_throttle.ts";
import { createHandler, type Handler } from "../../src/http/app.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { startMailer } from "../../src/server/start_mailer.ts";
import { openTestStore } from "../_helpers/store.ts";
import { startTlsServer, testCertificate, type TlsServer } from "../_helpers/tls_server.ts";
import { readCode, startTestSmtp, type TestSmtp } from "./_smtp.ts";
import { TEST_CODE_KEY } from "./_portal.ts";
import type { Store } from "../../src/store/store.ts";

const CHROMIUM = "/usr/bin/chromium";

function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (message) => {
    // Expected refusals the page shows: a sign-in before verification (401), a verification
    // with the wrong password (400).
    if (message.type() === "error" && !/status of 40[013]/.test(message.text())) {
      errors.push(message.text());
    }
  });
  page.on("pageerror", (error) => errors.push(String(error)));
  return errors;
}

/**
 * The signed-in page's own-account parts, each checked in the store: relabel a key; change the
 * e-mail through the mailed link's page; a wrong password deletes nothing; delete the account.
 */
async function manageAccount(
  page: Page,
  { email, password, shots, store, smtp }: {
    email: string;
    password: string;
    shots: string;
    store: Store;
    smtp: TestSmtp;
  },
): Promise<void> {
  const user = (await store.findUserByEmail(email))!;
  const [key] = await store.listApiKeys(user.id);
  await page.click(`[data-label='${key.id}']`);
  await page.fill(`#label-${key.id}`, "billing, production");
  await page.click(`[data-save-label='${key.id}']`);
  await page.waitForSelector("#keys tr:has-text('billing, production')");
  assert.equal((await store.findApiKeyById(key.id))?.label, "billing, production");

  const newEmail = "dev.new@example.org";
  await page.fill("#change-email #new-email", newEmail);
  await page.fill("#change-email #email-password", password);
  await page.click("#change-email-submit");
  await page.waitForSelector("#change-email-status:has-text('on its way')");
  await page.waitForSelector("#confirm-email");
  assert.equal((await store.findUserById(user.id))?.email, email, "not changed before the code");
  const mail = await smtp.waitFor(newEmail, "Confirm your new e-mail");
  const link = /https:\/\/\S+\/portal\/email\?\S+/.exec(mail.body)![0];
  await page.goto(link);
  assert.equal(await page.inputValue("#confirm-email #email-code"), readCode(mail));
  await page.screenshot({ path: `${shots}/portal-account.png`, fullPage: true });
  await page.click("#confirm-email-submit");
  await page.waitForSelector(`#confirm-email-status:has-text('${newEmail}')`);
  assert.equal(await page.textContent("#who"), newEmail);
  assert.equal((await store.findUserById(user.id))?.email, newEmail);
  assert.equal(await store.findUserByEmail(email), undefined);
  await smtp.waitFor(email, "address was changed");

  page.on("dialog", (dialog) => dialog.accept());
  await page.fill("#delete-account #delete-password", "not my password at all");
  await page.click("#delete-account-submit");
  await page.waitForSelector("#delete-account-status:has-text('password')");
  assert.ok(await store.findUserById(user.id), "a wrong password deletes nothing");
  await page.fill("#delete-account #delete-password", password);
  await page.click("#delete-account-submit");
  await page.waitForSelector("#sign-in-status:has-text('Your account was deleted, with 1 key(s)')");
  assert.equal(await store.findUserById(user.id), undefined);
  assert.deepEqual(await store.listApiKeys(user.id), []);
  assert.equal(await store.findApiKeyById(key.id), undefined);
}

/** What the flow's steps read: the developer's e-mail, the screenshots' folder, the mail server. */
interface Flow {
  email: string;
  shots: string;
  smtp: TestSmtp;
}

/**
 * Sign up; read the mail and open its link: the page asks for a click (a POST) before it
 * verifies, and takes only the password signed up with (no pre-hijacking). Verifying signs in.
 */
async function signUpAndVerify(
  page: Page,
  { origin, email, password, shots, store, smtp }: Flow & {
    origin: string;
    password: string;
    store: Store;
  },
): Promise<void> {
  await page.goto(`${origin}/portal/#signup`);
  await page.fill("#sign-up #email", email);
  await page.fill("#sign-up #password", password);
  await page.screenshot({ path: `${shots}/portal-sign-up.png` });
  await page.click("#sign-up-submit");
  await page.waitForSelector("#sign-up-status:has-text('on its way')");

  // Read the mail; open its link: the page asks for a click (a POST) before it verifies.
  const mail = await smtp.waitFor(email, "Verify");
  const link = /https:\/\/\S+\/portal\/verify\?\S+/.exec(mail.body)![0];
  assert.ok(link.startsWith(origin), link);
  await page.goto(link);
  assert.equal(await page.inputValue("#verify #code"), readCode(mail));
  assert.equal((await store.findUserByEmail(email))?.disabled, true, "not verified by a GET");
  // Verifying takes the password signed up with (no pre-hijacking): a wrong one is refused.
  await page.fill("#verify #password", "not the password signed up");
  await page.click("#verify-submit");
  await page.waitForSelector("#verify-status:has-text('sign up again')");
  assert.equal((await store.findUserByEmail(email))?.disabled, true, "a wrong password");
  await page.fill("#verify #password", password);
  await page.screenshot({ path: `${shots}/portal-verify.png` });

  // Verify and sign in in one step.
  await page.click("#verify-submit");
  await page.waitForSelector("#create-key");
}

/** Creates a key on the signed-in page; returns it as shown once. */
async function createKey(page: Page, shots: string): Promise<string> {
  await page.fill("#create-key #label", "billing service");
  await page.click("#create-key-submit");
  const apiKey = (await page.textContent("#new-key-value"))!.trim();
  assert.match(apiKey, /^[0-9a-f-]{36}$/);
  await page.waitForSelector("#keys tr:has-text('billing service')");
  await page.screenshot({ path: `${shots}/portal-keys.png` });
  return apiKey;
}

/**
 * A token from POST /api/userservice/tokens with that key, and a secure request with it;
 * returns a function that makes that secure request again.
 */
async function signInToApi(
  api: TlsServer,
  { email, password, apiKey }: { email: string; password: string; apiKey: string },
): Promise<() => Promise<Response>> {
  const login = await fetch(`${api.origin}/api/userservice/tokens`, {
    method: "POST",
    client: api.client,
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ auth_request: { user: { email, password }, api_key: apiKey } }),
  });
  assert.equal(login.status, 200, await login.clone().text());
  const token = (await login.json()).auth_response.access_token;
  const secure = () =>
    fetch(`${api.origin}/api/secure/userservice/tokens/current?api_key=${apiKey}`, {
      client: api.client,
      headers: { authorization: `Bearer ${token}`, accept: "application/json" },
    });
  const response = await secure();
  assert.equal(response.status, 200, await response.clone().text());
  await response.body?.cancel();
  return secure;
}

/** Sign out, forgot password, the code from the mail, a new password. */
async function resetPassword(page: Page, { email, shots, smtp }: Flow): Promise<void> {
  await page.click("#sign-out");
  await page.waitForSelector("#sign-in");
  await page.click("a[href='#forgot']");
  await page.fill("#forgot #email", email);
  await page.click("#forgot-submit");
  await page.waitForSelector("#reset");
  const reset = await smtp.waitFor(email, "Reset");
  await page.fill("#reset #code", readCode(reset));
  await page.fill("#reset #password", "a brand new passphrase");
  await page.screenshot({ path: `${shots}/portal-reset.png` });
  await page.click("#reset-submit");
  await page.waitForSelector("#reset-status:has-text('every access token ended')");
  await smtp.waitFor(email, "password was changed");
}

Deno.test({
  name: "[portal] a developer signs up, verifies, makes a key and a token, resets the password",
  ignore: !existsSync(CHROMIUM) && Deno.env.get("CI") !== "true",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const shots = Deno.env.get("KEYGATE_SCREENSHOTS") ??
      await Deno.makeTempDir({ prefix: "keygate-portal-shots-" });
    await Deno.mkdir(shots, { recursive: true });
    const tls = await testCertificate();
    await using opened = await openTestStore();
    const store = opened.store;
    const clock = systemClock;
    await using smtp = await startTestSmtp(tls);
    const hasher = createPasswordHasher({ workers: 1 });
    let wake = () => {};
    // The handler needs the server's origin (`--portal-origin`), known once it listens.
    let handler: Handler = () => Promise.resolve(new Response(null, { status: 503 }));
    await using api = await startTlsServer((request, info) => handler(request, info));
    handler = createHandler({
      store,
      clock,
      logger: silentLogger,
      hasher,
      defaultTimeoutSeconds: 36000,
      portal: {
        throttle: createPortalThrottle({ store, clock, key: TEST_CODE_KEY }),
        mode: "open",
        codeKey: TEST_CODE_KEY,
        origin: api.origin,
        onMailQueued: () => wake(),
      },
    });
    await using mailer = startMailer({
      store,
      clock,
      logger: silentLogger,
      smtpUrl: smtp.url,
      from: "portal@keygate.test",
      ca: tls.cert,
      pollMs: 200,
    });
    wake = mailer.wake;
    const profile = await Deno.makeTempDir({ prefix: "keygate-chromium-" });
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
      ignoreHTTPSErrors: true,
      viewport: { width: 1100, height: 760 },
    });
    try {
      const page = await context.newPage();
      const errors = watchErrors(page);
      const email = "dev@example.org";
      let password = "correct horse battery";

      await signUpAndVerify(page, { origin: api.origin, email, password, shots, store, smtp });
      const apiKey = await createKey(page, shots);
      const secure = await signInToApi(api, { email, password, apiKey });
      await resetPassword(page, { email, shots, smtp });
      const response = await secure();
      assert.equal(response.status, 401, "the old token is refused");
      await response.body?.cancel();

      // Signed in again: relabel the key, change the e-mail, delete the account.
      password = "a brand new passphrase";
      await page.goto(`${api.origin}/portal/`);
      await page.fill("#sign-in #email", email);
      await page.fill("#sign-in #password", password);
      await page.click("#sign-in-submit");
      await page.waitForSelector("#create-key");
      await manageAccount(page, { email, password, shots, store, smtp });
      assert.deepEqual(errors, []);
      assert.equal(
        smtp.received.some((m) => m.raw.includes(apiKey)),
        false,
        "a key is never mailed",
      );
    } finally {
      await context.close();
      await Deno.remove(profile, { recursive: true });
      hasher.close();
    }
  },
});
