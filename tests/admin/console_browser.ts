/**
 * The web console in headless Chromium (Debian's `chromium`, driven by
 * playwright-core): the real admin and API handlers over real TLS, an
 * operator signing in with the keyboard, creating a user and a key (shown
 * once, then only its prefix), rotating it, revoking a token (the next
 * secure request with it is refused), filtering the audit log, and a
 * read-only operator who sees no write button and gets 403 from the API.
 * No page may log an error or a Content-Security-Policy violation.
 *
 * Screenshots go to a temporary folder; with KEYGATE_SCREENSHOTS=docs/console
 * they replace the ones in the docs.
 *
 * Not a `_test.ts` file: playwright-core reads /proc at load time, which Deno
 * allows only with --allow-all, so console_test.ts runs this file in a
 * `deno test --allow-all` process of its own, and the rest of the suite keeps
 * its narrower permissions.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { readAdminStats } from "../../src/auth/admin_tasks.ts";
import { AUDIT_ACTIONS } from "../../src/auth/audit.ts";
import { hashSecret } from "../../src/auth/credentials.ts";
import { createKeyUsageRecorder } from "../../src/auth/key_usage.ts";
import { createStatsHistory } from "../../src/auth/stats_history.ts";
import { createOperator } from "../../src/auth/operators.ts";
import { createAdminHandler } from "../../src/http/admin/admin_app.ts";
import { createHandler } from "../../src/http/app.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createMetrics } from "../../src/platform/metrics.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { openTestStore } from "../_helpers/store.ts";
import { startTlsServer } from "../_helpers/tls_server.ts";

/** Debian's Chromium; .ci/run installs it. */
const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const hasChromium = existsSync(CHROMIUM);
const inCi = Deno.env.get("CI") === "true";

async function openBrowser(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = await Deno.makeTempDir({ prefix: "keygate-chromium-" });
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS, // the fresh profile is passed as --user-data-dir by playwright
    ignoreHTTPSErrors: true, // the test certificate is self-signed
    viewport: { width: 1280, height: 860 },
    permissions: ["clipboard-read", "clipboard-write"],
  });
  return {
    context,
    async close() {
      await context.close();
      await Deno.remove(profile, { recursive: true });
    },
  };
}

/** Fails the test on any console error or CSP violation of the page. */
function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(String(error)));
  return errors;
}

Deno.test({
  name: "[console] an operator manages users, keys and tokens in Chromium; a reader cannot",
  ignore: !hasChromium && !inCi,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const shots = Deno.env.get("KEYGATE_SCREENSHOTS") ??
      await Deno.makeTempDir({ prefix: "keygate-shots-" });
    await Deno.mkdir(shots, { recursive: true });
    await using opened = await openTestStore();
    const store = opened.store;
    const clock = systemClock;
    const logger = createLogger({ level: "error", write: () => {} });
    const hasher = createPasswordHasher({ workers: 1 });
    const metrics = createMetrics({ countLiveTokens: () => store.countLiveTokens(clock.now()) });
    let sampledAt = clock.now() - 5 * 60_000;
    const history = createStatsHistory({
      read: () => readAdminStats({ store, now: sampledAt, readCounters: metrics.readCounters }),
      clock,
    });
    await using admin = await startTlsServer(createAdminHandler({
      store,
      clock,
      logger,
      hasher,
      readCounters: metrics.readCounters,
      defaultTimeoutSeconds: 36000,
      history,
      portalOrigin: "https://portal.example.org",
    }));
    const keyUsage = createKeyUsageRecorder({ store, clock, logger });
    await using api = await startTlsServer(
      createHandler({
        store,
        clock,
        logger,
        hasher,
        metrics,
        keyUsage,
        defaultTimeoutSeconds: 36000,
      }),
    );
    const cli = { store, clock, actor: "cli:test" };
    const writeToken = (await createOperator(cli, "ann", "write")).token;
    const readToken = (await createOperator(cli, "grafana", "read")).token;
    const browser = await openBrowser();

    async function login(email: string, password: string, apiKey: string): Promise<string> {
      const response = await fetch(`${api.origin}/api/userservice/tokens`, {
        method: "POST",
        client: api.client,
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ auth_request: { user: { email, password }, api_key: apiKey } }),
      });
      assert.equal(response.status, 200, await response.clone().text());
      return (await response.json()).auth_response.access_token;
    }
    async function addUser(address: string) {
      await store.insertUser(
        { email: address, passwordHash: await hasher.hash("pw"), tokenTimeoutSeconds: null },
        { now: clock.now(), audit: undefined },
      );
    }
    async function secureStatus(apiKey: string, token: string): Promise<number> {
      const url = new URL(`${api.origin}/api/secure/userservice/tokens/current`);
      url.searchParams.set("api_key", apiKey);
      url.searchParams.set("api_token", token);
      const response = await fetch(url, { client: api.client });
      await response.body?.cancel();
      return response.status;
    }

    try {
      const page = await browser.context.newPage();
      const errors = watchErrors(page);
      let apiKey = "";
      let email = "";

      await t.step("sign in with the keyboard; a wrong token is refused", async () => {
        await page.goto(`${admin.origin}/`);
        const token = page.getByLabel("Operator token");
        await token.waitFor();
        assert.equal(await page.evaluate("document.activeElement.name"), "token", "focused");
        assert.equal(await page.getByRole("navigation").count(), 0, "no sections before sign-in");
        assert.equal(await page.getByRole("button", { name: "Sign out" }).count(), 0);
        await page.screenshot({ path: `${shots}/sign-in.png` });
        await page.keyboard.type("kgo_" + "x".repeat(40));
        await page.keyboard.press("Enter");
        await page.getByRole("alert").getByText("Missing or invalid operator token").waitFor();
        // That refusal is the one error the browser may log (a 401 resource); none after it.
        assert.deepEqual(errors.map((e) => e.includes("status of 401")), [true]);
        errors.length = 0;
        await token.fill(writeToken);
        await page.keyboard.press("Enter");
        await page.getByRole("heading", { name: "Dashboard" }).waitFor();
        assert.match(await page.locator("#who").innerText(), /ann \(write\)/);
        assert.equal(
          await page.evaluate(() => sessionStorage.getItem("keygate.operatorToken")),
          writeToken,
        );
        const cookies = await browser.context.cookies();
        assert.deepEqual(cookies, [], "no cookie: the token travels only in a header");
      });

      await t.step("create a user from the users page", async () => {
        await page.getByRole("link", { name: "Users" }).click();
        await page.getByRole("heading", { name: "Add a user" }).waitFor();
        email = "carol@example.org";
        await page.getByLabel("E-mail", { exact: true }).fill(email);
        await page.getByLabel("Password").fill("correct horse");
        await page.getByLabel("Token lifetime").fill("2h");
        await page.getByRole("button", { name: "Add user" }).click();
        await page.getByRole("heading", { name: email }).waitFor();
        const stored = await store.findUserByEmail(email);
        assert.equal(stored?.tokenTimeoutSeconds, 7200);
        for (const other of ["dave@example.org", "erin@example.org"]) {
          await addUser(other);
        }
        await page.goto(`${admin.origin}/#/users`);
        await page.getByRole("link", { name: email }).waitFor();
        await page.screenshot({ path: `${shots}/users.png` });
      });

      await t.step(
        "create a key: shown once with a copy button, then only its prefix",
        async () => {
          await page.getByRole("link", { name: email }).click();
          await page.getByLabel("Label").fill("billing app");
          await page.getByRole("button", { name: "Create key" }).click();
          const dialog = page.getByRole("dialog");
          await dialog.getByRole("heading", { name: /New key/ }).waitFor();
          apiKey = await dialog.locator("#secret-value").innerText();
          assert.match(
            apiKey,
            /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
          );
          await dialog.getByRole("button", { name: "Copy" }).click();
          await dialog.getByText("Copied").waitFor();
          assert.equal(await page.evaluate("navigator.clipboard.readText()"), apiKey);
          await page.screenshot({ path: `${shots}/key-created.png` });
          await dialog.getByRole("button", { name: "I have stored it" }).click();
          await page.getByRole("cell", { name: `${apiKey.slice(0, 8)}…` }).waitFor();
          assert.equal(
            (await page.content()).includes(apiKey),
            false,
            "the key is gone from the page",
          );
        },
      );

      let token = "";
      await t.step("rotate the key after confirming; the successor is shown once", async () => {
        token = await login(email, "correct horse", apiKey);
        assert.equal(await secureStatus(apiKey, token), 200);
        assert.equal(await keyUsage.flush(), 1);
        await page.reload();
        const used = page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` });
        await used.getByText("from 127.0.0.1").waitFor(); // the key's last use
        const row = page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` });
        await row.getByRole("button", { name: /Rotate key/ }).click();
        const dialog = page.getByRole("dialog");
        await dialog.getByLabel("Grace period").fill("1h");
        await dialog.getByRole("button", { name: "Rotate key" }).click();
        await page.getByRole("dialog").getByRole("heading", { name: /New key/ }).waitFor();
        const successor = await page.locator("#secret-value").innerText();
        assert.notEqual(successor, apiKey);
        await page.getByRole("button", { name: "I have stored it" }).click();
        await page.getByRole("cell", { name: `${successor.slice(0, 8)}…` }).waitFor();
        const [old] = await store.listApiKeys();
        assert.notEqual(old.replacedBy, null);
        assert.equal(await secureStatus(apiKey, token), 200, "the old key works during the grace");
        await page.screenshot({ path: `${shots}/user.png`, fullPage: true });
      });

      await t.step("disable and enable a key; change the token lifetime", async () => {
        const row = page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` });
        await row.getByRole("button", { name: /Disable key/ }).click();
        await page.getByRole("dialog").getByRole("button", { name: "Disable key" }).click();
        await page.getByRole("status").getByText(/is disabled/).waitFor();
        assert.equal(await secureStatus(apiKey, token), 401, "a disabled key's token is refused");
        await page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` })
          .getByRole("button", { name: /Enable key/ }).click();
        await page.getByRole("status").getByText(/is active/).waitFor();
        // The page is drawn again after the change: wait for it before typing into it.
        await page.locator("tr", { hasText: `${apiKey.slice(0, 8)}…` })
          .getByRole("button", { name: /Disable key/ }).waitFor();
        assert.equal(await secureStatus(apiKey, token), 200);
        await page.getByLabel("Lifetime of new tokens").fill("45m");
        await page.getByRole("button", { name: "Save lifetime" }).click();
        await page.getByRole("status").getByText("Token lifetime is now 45m").waitFor();
        assert.equal((await store.findUserByEmail(email))?.tokenTimeoutSeconds, 2700);
      });

      await t.step("revoke a token: the next secure request with it is refused", async () => {
        const row = page.locator("tr[data-token-id]").first();
        await row.getByRole("button", { name: /Revoke token/ }).click();
        const dialog = page.getByRole("dialog");
        await dialog.getByText(/Revoke token \d+\?/).waitFor();
        await page.screenshot({ path: `${shots}/confirm.png` });
        await dialog.getByRole("button", { name: "Revoke token" }).click();
        await page.getByRole("status").getByText(/Token \d+ revoked/).waitFor();
        assert.equal(await secureStatus(apiKey, token), 401);
      });

      await t.step("the dashboard charts the server's history, then live samples", async () => {
        // Four minutes of history: the real counters after 1, 2, 3 and 4 logins and a
        // failure each minute, sampled as the server's minute timer would.
        for (let minute = 1; minute <= 4; minute++) {
          for (let i = 0; i < minute; i++) await login(email, "correct horse", apiKey);
          await fetch(`${api.origin}/api/userservice/tokens`, {
            method: "POST",
            client: api.client,
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              auth_request: { user: { email, password: "wrong" }, api_key: apiKey },
            }),
          }).then((response) => response.body?.cancel());
          await history.sampleNow();
          sampledAt += 60_000;
        }
        await page.getByRole("link", { name: "Dashboard" }).click();
        const logins = page.locator("figure.chart", { hasText: /^Logins per minute/ });
        await logins.locator("polyline").waitFor(); // at once, from the history
        assert.equal(await page.locator("figure.chart").count(), 4);
        assert.match(
          await logins.locator("svg").getAttribute("aria-label") ?? "",
          /Logins per minute: from 2 to \d+/,
        );
        await page.waitForTimeout(5500); // one live sample
        await page.screenshot({ path: `${shots}/dashboard.png` });
      });

      await t.step(
        "the keys page lists every key with its owner, and finds unused ones",
        async () => {
          await page.getByRole("link", { name: "API keys" }).click();
          await page.getByRole("heading", { name: "API keys" }).waitFor();
          const rows = page.locator("tbody tr[data-key-id]");
          await rows.first().waitFor();
          assert.equal(await rows.count(), 2);
          assert.match(await rows.first().innerText(), /carol@example\.org/);
          await page.screenshot({ path: `${shots}/keys.png` });
          await page.getByLabel("Not used for").selectOption("7d");
          await page.getByRole("button", { name: "Show" }).click();
          await page.waitForURL(/unused=7d/);
          await page.getByRole("cell", { name: "None" }).waitFor(); // both were used or made today
        },
      );

      await t.step("filter the audit log by action", async () => {
        await page.getByRole("link", { name: "Audit log" }).click();
        await page.getByLabel("Action").selectOption("key.rotated");
        // selectOption waited for the page; its list is the server's actions (src/auth/audit.ts,
        // through the OpenAPI document).
        assert.deepEqual(
          await page.getByLabel("Action").locator("option").evaluateAll((options) =>
            options.map((option) => (option as unknown as { value: string }).value)
          ),
          ["", ...AUDIT_ACTIONS],
        );
        await page.getByRole("button", { name: "Filter" }).click();
        await page.waitForURL(/action=key.rotated/);
        const rows = page.locator("tbody tr");
        await rows.first().getByText("key.rotated").waitFor();
        assert.equal(await rows.count(), 1);
        assert.match(await rows.first().innerText(), /operator:ann/);
        await page.getByLabel("Action").selectOption("");
        await page.getByLabel("Actor").fill("operator:ann");
        await page.getByRole("button", { name: "Filter" }).click();
        await page.waitForURL(/actor=operator/);
        await page.locator("tbody tr").nth(3).waitFor();
        const actors = await page.locator("tbody tr td:nth-child(2)").allInnerTexts();
        assert.ok(
          actors.length >= 4 && actors.every((actor) => actor === "operator:ann"),
          String(actors),
        );
        await page.screenshot({ path: `${shots}/audit.png` });
      });

      await t.step("delete a user after confirming", async () => {
        await page.goto(`${admin.origin}/#/users`);
        await page.getByRole("link", { name: "erin@example.org" }).click();
        await page.getByRole("button", { name: "Delete user" }).click();
        const dialog = page.getByRole("dialog");
        await dialog.getByText(/cannot be undone/).waitFor();
        await dialog.getByRole("button", { name: "Delete user" }).click();
        await page.getByRole("status").getByText("Deleted erin@example.org", { exact: false })
          .waitFor();
        await page.waitForURL(/#\/users$/);
        assert.equal(await store.findUserByEmail("erin@example.org"), undefined);
      });

      await t.step("the throttle page lists the failed sign-in's counter", async () => {
        await page.getByRole("link", { name: "Throttle" }).click();
        await page.getByRole("cell", { name: "admin:127.0.0.1" }).waitFor();
        await page.getByRole("heading", { name: "Clear counters" }).waitFor();
        await page.screenshot({ path: `${shots}/throttle.png` });
      });

      await t.step("set a key's rate on the limits page, see what is left, remove it", async () => {
        const [key] = (await store.listApiKeys()).filter((k) => k.revokedAt === null);
        await page.getByRole("link", { name: "Limits" }).click();
        await page.getByRole("heading", { name: "Set a limit" }).waitFor();
        await page.getByLabel("Applies to").selectOption("key");
        await page.getByLabel("Key or user id").fill(String(key.id));
        await page.getByLabel("Kind").selectOption("rate");
        await page.getByLabel("Limit", { exact: true }).fill("5/minute");
        await page.getByRole("button", { name: "Set limit" }).click();
        await page.getByRole("status").getByText(`The rate of key ${key.id} is now 5/minute`)
          .waitFor();
        await page.getByRole("cell", { name: "5/minute", exact: true }).waitFor();
        const [stored] = await store.listLimits();
        assert.deepEqual([stored.scope, stored.subjectId, stored.max, stored.period], [
          "key",
          key.id,
          5,
          "minute",
        ]);
        await page.getByLabel("Key id").fill(String(key.id));
        await page.getByRole("button", { name: "Show its limits" }).click();
        const usage = page.locator("table", { hasText: `In force for key ${key.id}` });
        await usage.getByRole("cell", { name: "5", exact: true }).first().waitFor();
        await page.screenshot({ path: `${shots}/limits.png`, fullPage: true });
        await page.getByRole("button", { name: /Remove the rate 5\/minute/ }).click();
        await page.getByRole("dialog").getByRole("button", { name: "Remove limit" }).click();
        await page.getByRole("status").getByText(`Removed the rate of key ${key.id}`).waitFor();
        assert.deepEqual(await store.listLimits(), []);
        const audit = await store.searchAudit({ limit: 5, actor: "operator:ann" });
        assert.deepEqual(audit.slice(0, 2).map((row) => row.action), [
          "limit.removed",
          "limit.set",
        ]);
      });

      await t.step("stored invisible and bidirectional characters are shown escaped", async () => {
        const user = await store.insertUser(
          { email: "zed\u200b@example.org", passwordHash: "x", tokenTimeoutSeconds: null },
          { now: clock.now(), audit: undefined },
        );
        await store.insertApiKey({
          userId: user.id,
          keyHash: hashSecret("console-rlo-key"),
          prefix: "rlo12345",
          label: "billing\u202etxt.exe",
          expiresAt: null,
          introspect: false,
        }, { now: clock.now(), audit: undefined });
        await page.goto(`${admin.origin}/#/users/${user.id}`);
        await page.getByText(String.raw`billing\u202etxt.exe`).waitFor();
        const text = await page.locator("main").innerText();
        assert.doesNotMatch(text, /[\u200b\u202e]/);
        assert.ok(text.includes(String.raw`zed\u200b@example.org`), text);
        await page.goto(`${admin.origin}/#/keys`);
        await page.getByText(String.raw`billing\u202etxt.exe`).waitFor();
      });

      await t.step("a list longer than a page goes on with Next page and back", async () => {
        for (let i = 0; i < 26; i++) {
          await store.insertUser(
            {
              email: `page${String(i).padStart(2, "0")}@example.org`,
              passwordHash: "x",
              tokenTimeoutSeconds: null,
            },
            { now: clock.now(), audit: undefined },
          );
        }
        await page.goto(`${admin.origin}/#/users`);
        await page.getByRole("link", { name: "Next page" }).click();
        await page.waitForURL(/cursor=/);
        await page.getByRole("link", { name: "First page" }).waitFor();
        const second = await page.locator("tbody tr td:first-child").allInnerTexts();
        assert.ok(second.length >= 1 && second.length <= 25, String(second));
        assert.ok(second.every((email) => email > "page"), String(second));
        await page.getByRole("link", { name: "First page" }).click();
        await page.waitForURL(/#\/users$/);
      });

      await t.step("approve and refuse portal sign-ups that wait for an operator", async () => {
        const waiting = [];
        for (const address of ["pat@example.org", "quinn@example.org", "rae@example.org"]) {
          waiting.push(
            await store.insertPortalUser(
              { email: address, passwordHash: "x", tokenTimeoutSeconds: null },
              {
                now: clock.now(),
                state: "pending_approval",
                mail: { recipient: address, subject: "Verify", text: "code" },
                audit: undefined,
              },
            ),
          );
        }
        const [pat, quinn] = waiting;
        await page.getByRole("link", { name: "Portal sign-ups" }).click();
        await page.getByRole("heading", { name: "Portal sign-ups" }).waitFor();
        await page.getByRole("cell", { name: "rae@example.org", exact: true }).waitFor();
        await page.screenshot({ path: `${shots}/portal-approval.png` });
        await page.getByRole("button", { name: "Approve pat@example.org" }).click();
        await page.getByRole("dialog").getByRole("button", { name: "Approve" }).click();
        await page.getByRole("status").getByText("pat@example.org approved").waitFor();
        await page.getByRole("button", { name: "Refuse quinn@example.org" }).click();
        const dialog = page.getByRole("dialog");
        await dialog.getByText(/The account is deleted/).waitFor();
        await dialog.getByRole("button", { name: "Refuse" }).click();
        await page.getByRole("status").getByText("quinn@example.org refused").waitFor();
        await page.getByRole("cell", { name: "quinn@example.org", exact: true }).waitFor({
          state: "detached",
        });
        assert.deepEqual(await page.locator("tbody tr td:first-child").allInnerTexts(), [
          "rae@example.org",
        ]);
        assert.equal((await store.findPortalAccount(pat.id))?.state, "active");
        assert.equal((await store.findUserById(pat.id))?.disabled, false);
        assert.equal(await store.findUserById(quinn.id), undefined);
        const audit = await store.searchAudit({ limit: 2, actor: "operator:ann" });
        assert.deepEqual(audit.map((row) => row.action), ["portal.refused", "portal.approved"]);
      });

      await t.step("no page logged an error or a CSP violation (Chromium logs those)", () => {
        assert.deepEqual(errors, []);
      });

      await t.step(
        "the CSP refuses an injected inline script, and the watch above sees it",
        async () => {
          await page.evaluate(
            "document.body.append(Object.assign(document.createElement('script'), { textContent: 'window.injected = 1' }))",
          );
          assert.equal(await page.evaluate("window.injected"), undefined);
          assert.ok(errors.some((e) => e.includes("Content Security Policy")), String(errors));
          errors.length = 0;
        },
      );

      await t.step(
        "a read-only operator sees no write button and gets 403 from the API",
        async () => {
          await page.getByRole("button", { name: "Sign out" }).click();
          await page.getByLabel("Operator token").fill(readToken);
          await page.getByRole("button", { name: "Sign in" }).click();
          await page.getByRole("heading", { name: "Dashboard" }).waitFor();
          await page.goto(`${admin.origin}/#/users`);
          await page.getByRole("link", { name: email }).click();
          await page.getByRole("heading", { name: "API keys" }).waitFor();
          for (
            const name of [
              "Create key",
              "Rotate",
              "Revoke",
              "Disable",
              "Enable",
              "Disable user",
              "Delete user",
              "Revoke all tokens",
              "Save lifetime",
              "Set password",
            ]
          ) {
            assert.equal(await page.getByRole("button", { name }).count(), 0, name);
          }
          await page.screenshot({ path: `${shots}/read-only.png` });
          const status = await page.evaluate(async () => {
            const response = await fetch("/admin/v1/users", {
              method: "POST",
              headers: {
                authorization: `Bearer ${sessionStorage.getItem("keygate.operatorToken")}`,
                "content-type": "application/json",
              },
              body: JSON.stringify({ email: "mallory@example.org", password: "x" }),
            });
            return [response.status, (await response.json()).error.code];
          });
          assert.deepEqual(status, [403, "forbidden"]);
          assert.equal(await store.findUserByEmail("mallory@example.org"), undefined);
          await page.goto(`${admin.origin}/#/users`);
          assert.equal(await page.getByRole("heading", { name: "Add a user" }).count(), 0);
          await page.goto(`${admin.origin}/#/portal`);
          await page.getByRole("cell", { name: "rae@example.org", exact: true }).waitFor();
          assert.equal(await page.getByRole("button", { name: /Approve|Refuse/ }).count(), 0);
        },
      );
    } finally {
      await browser.close();
      hasher.close();
    }
  },
});
