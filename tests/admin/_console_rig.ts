/**
 * The console's Chromium harness (console_browser.ts): the real admin and API handlers over
 * real TLS on a test store, two operators (`ann` write, `grafana` read), a fresh Chromium
 * profile, and the helpers the steps share. Not a test file: console_browser.ts runs it with
 * --allow-all (see console_test.ts).
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { readAdminStats } from "../../src/auth/admin_tasks.ts";
import { createKeyUsageRecorder, type KeyUsageRecorder } from "../../src/auth/key_usage.ts";
import { createStatsHistory, type StatsHistory } from "../../src/auth/stats_history.ts";
import { createOperator } from "../../src/auth/operators.ts";
import { createAdminHandler } from "../../src/http/admin/admin_app.ts";
import { createHandler } from "../../src/http/app.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createMetrics } from "../../src/platform/metrics.ts";
import { type Clock, systemClock } from "../../src/platform/clock.ts";
import { createPasswordHasher, type PasswordHasher } from "../../src/passwords/passwords.ts";
import type { Store } from "../../src/store/store.ts";
import { openTestStore } from "../_helpers/store.ts";
import { startTlsServer, type TlsServer } from "../_helpers/tls_server.ts";

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
export const hasChromium = existsSync(CHROMIUM);
export const inCi = Deno.env.get("CI") === "true";

/** A fresh Chromium profile, removed on close. */
export async function openBrowser(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
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

/** Collects the page's console errors and CSP violations (the test asserts there are none). */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(String(error)));
  return errors;
}

/** The servers, the store and the operators the console's steps use. */
export interface ConsoleRig extends AsyncDisposable {
  store: Store;
  clock: Clock;
  hasher: PasswordHasher;
  admin: TlsServer;
  api: TlsServer;
  history: StatsHistory;
  keyUsage: KeyUsageRecorder;
  writeToken: string;
  readToken: string;
  browser: { context: BrowserContext; close(): Promise<void> };
  /** The time the dashboard's history samples at (the dashboard step moves it). */
  sampledAt: number;
  /** Issues a token through the public API. */
  login(email: string, password: string, apiKey: string): Promise<string>;
  /** Adds a user (password "pw") straight into the store. */
  addUser(address: string): Promise<void>;
  /** A secure request through the public API; resolves to its status. */
  secureStatus(apiKey: string, token: string): Promise<number>;
}

/** One run of the console's steps: the rig, the page, and what the steps hand on. */
export interface ConsoleRun {
  t: Deno.TestContext;
  rig: ConsoleRig;
  page: Page;
  /** The page's errors so far (see {@link watchErrors}). */
  errors: string[];
  /** Where screenshots go. */
  shots: string;
  /** The user the first steps create, and its first key. */
  email: string;
  apiKey: string;
}

/** Starts the rig; disposing it closes the browser, the servers, the hasher and the store. */
export async function startConsoleRig(): Promise<ConsoleRig> {
  await using stack = new AsyncDisposableStack();
  const opened = stack.use(await openTestStore());
  const store = opened.store;
  const clock = systemClock;
  const logger = createLogger({ level: "error", write: () => {} });
  const hasher = createPasswordHasher({ workers: 1 });
  stack.defer(() => hasher.close());
  const metrics = createMetrics({ countLiveTokens: () => store.countLiveTokens(clock.now()) });
  const history = createStatsHistory({
    read: () => readAdminStats({ store, now: rig.sampledAt, readCounters: metrics.readCounters }),
    clock,
  });
  const admin = stack.use(
    await startTlsServer(createAdminHandler({
      store,
      clock,
      logger,
      hasher,
      readCounters: metrics.readCounters,
      defaultTimeoutSeconds: 36000,
      history,
      portalOrigin: "https://portal.example.org",
    })),
  );
  const keyUsage = createKeyUsageRecorder({ store, clock, logger });
  const api = stack.use(
    await startTlsServer(
      createHandler({
        store,
        clock,
        logger,
        hasher,
        metrics,
        keyUsage,
        defaultTimeoutSeconds: 36000,
      }),
    ),
  );
  const cli = { store, clock, actor: "cli:test" };
  const writeToken = (await createOperator(cli, "ann", "write")).token;
  const readToken = (await createOperator(cli, "grafana", "read")).token;
  const browser = await openBrowser();
  stack.defer(() => browser.close());

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

  const owned = stack.move();
  const rig: ConsoleRig = {
    store,
    clock,
    hasher,
    admin,
    api,
    history,
    keyUsage,
    writeToken,
    readToken,
    browser,
    sampledAt: clock.now() - 5 * 60_000,
    login,
    addUser,
    secureStatus,
    [Symbol.asyncDispose]: () => owned.disposeAsync(),
  };
  return rig;
}
