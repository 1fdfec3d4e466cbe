/**
 * The portal's test rig: the real handler with the portal on, over the test store, a real
 * SMTP server and the real mailer, and a small client that keeps the session cookie and the
 * CSRF token as a browser page would.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  createPortalThrottle,
  type PortalThrottleRules,
} from "../../src/auth/portal/portal_throttle.ts";
import type { SignUpMode } from "../../src/auth/portal/account_deps.ts";
import { startMailer } from "../../src/server/start_mailer.ts";
import { BASE } from "../_helpers/requests.ts";
import { createTestApp, type TestApp } from "../_helpers/test_app.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { readCode, startTestSmtp, type TestSmtp } from "./_smtp.ts";
import { PASSWORD } from "./_portal_answers.ts";
import type { Store } from "../../src/store/store.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createHandler } from "../../src/http/app.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";

/** The password hasher the rigs share (one worker pool for the whole test file). */
export const hasher = createPasswordHasher();

export const ORIGIN = BASE;

/** The code key (`--portal-secret-file`, required with the portal on) the rigs use by default. */
export const TEST_CODE_KEY = new Uint8Array(32).map((_, i) => (i * 53 + 7) & 0xff);

/** The rig. */
export interface PortalRig extends AsyncDisposable {
  app: TestApp;
  smtp: TestSmtp;
  /** A JSON request to the portal's API (`/api/portal/v1` + `path`). */
  api(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Response>;
  /** A client with its own cookie jar. */
  browser(): PortalBrowser;
  /**
   * How often the portal has told the mailer that mail may be queued (`onMailQueued`): by a
   * route, and once more when forgot-password's deferred work (after the answer) is done.
   */
  mailQueuedCalls(): number;
  /** Resolves once {@link mailQueuedCalls} reaches `count` (at most 20 s). */
  waitForMailQueued(count: number): Promise<void>;
}

/** A client that keeps the session cookie and CSRF token. */
export interface PortalBrowser {
  cookie?: string;
  csrf?: string;
  call(method: string, path: string, body?: unknown): Promise<Response>;
  signIn(email: string, password: string): Promise<void>;
}

/** Options of {@link startPortalRig}. */
export interface PortalRigOptions {
  mode?: SignUpMode;
  domains?: string[];
  /** `--portal-existing-users` (default off). */
  existingUsers?: boolean;
  /** The key of `--portal-secret-file` (default: {@link TEST_CODE_KEY}). */
  codeKey?: Uint8Array;
  throttleRules?: PortalThrottleRules;
  /** The password hasher (default: one shared by the rigs, see {@link withRefusal}). */
  hasher?: typeof hasher;
}

/**
 * The rigs' hasher, but refusing as an overloaded pool would while `refusal()` returns a
 * Retry-After in seconds (`findRefusal`, the check a request makes before any work).
 */
export function withRefusal(refusal: () => number | undefined): typeof hasher {
  return { ...hasher, findRefusal: () => refusal() ?? hasher.findRefusal() };
}

/**
 * A JSON `POST` to the portal's API from `address`, as the listener would hand it over; its
 * status, `Retry-After` and JSON body (the content type checked).
 */
export async function postFrom(rig: PortalRig, address: string, path: string, body: unknown) {
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

/** Starts the rig. */
export async function startPortalRig(options: PortalRigOptions = {}): Promise<PortalRig> {
  const tls = await testCertificate();
  const smtp = await startTestSmtp(tls);
  let wake = () => {};
  let mailQueuedCalls = 0;
  const app = await createTestApp().catch(async (error) => {
    await smtp[Symbol.asyncDispose]();
    throw error;
  });
  const handler = createHandler({
    store: app.store,
    hasher: options.hasher ?? hasher,
    clock: app.clock,
    logger: silentLogger,
    defaultTimeoutSeconds: 36000,
    portal: {
      throttle: createPortalThrottle({
        store: app.store,
        clock: app.clock,
        key: options.codeKey ?? TEST_CODE_KEY,
        rules: options.throttleRules,
      }),
      mode: options.mode ?? "open",
      domains: options.domains,
      existingUsers: options.existingUsers ?? false,
      codeKey: options.codeKey ?? TEST_CODE_KEY,
      origin: ORIGIN,
      onMailQueued: () => {
        mailQueuedCalls++;
        wake();
      },
    },
  });
  const mailer = startMailer({
    store: app.store,
    // Real time: the CLI (another process) queues mail at real times, the app at its fake ones.
    clock: systemClock,
    logger: silentLogger,
    smtpUrl: smtp.url,
    from: "portal@keygate.test",
    ca: tls.cert,
    pollMs: 100,
  });
  wake = mailer.wake;

  function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    return handler(
      new Request(`${BASE}/api/portal/v1${path}`, {
        method,
        headers: {
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          origin: ORIGIN,
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  }

  return {
    app: { ...app, handler },
    smtp,
    api,
    browser() {
      const browser: PortalBrowser = {
        async call(method, path, body) {
          const response = await api(method, path, body, {
            ...(browser.cookie ? { cookie: browser.cookie } : {}),
            ...(browser.csrf ? { "x-csrf-token": browser.csrf } : {}),
          });
          const set = response.headers.get("set-cookie");
          if (set !== null) browser.cookie = set.split(";")[0];
          return response;
        },
        async signIn(email, password) {
          const response = await browser.call("POST", "/signin", { email, password });
          assert.equal(response.status, 200, await response.clone().text());
          browser.csrf = (await response.json()).csrf_token;
        },
      };
      return browser;
    },
    mailQueuedCalls: () => mailQueuedCalls,
    async waitForMailQueued(count) {
      const until = Date.now() + 20_000;
      while (mailQueuedCalls < count) {
        if (Date.now() > until) throw new Error(`onMailQueued called ${mailQueuedCalls} times`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    async [Symbol.asyncDispose]() {
      await mailer[Symbol.asyncDispose]();
      await smtp[Symbol.asyncDispose]();
      await app[Symbol.asyncDispose]();
    },
  };
}

/** Signs `email` up and verifies it with the code mailed to it: the account is active. */
export async function verifiedAccount(
  rig: PortalRig,
  email: string,
  password = PASSWORD,
): Promise<void> {
  let response = await rig.api("POST", "/signup", { email, password });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  response = await rig.api("POST", "/verify", { email, code, password });
  assert.equal(response.status, 200);
  await response.body?.cancel();
}

/** {@link verifiedAccount}, and a browser signed in to it. */
export async function activeUser(
  rig: PortalRig,
  email: string,
  password = PASSWORD,
): Promise<PortalBrowser> {
  await verifiedAccount(rig, email, password);
  const browser = rig.browser();
  await browser.signIn(email, password);
  return browser;
}

/** Resolves once the outbox holds `sent` sent messages (at most 40 s): none is sent again. */
export async function waitForSentMail(store: Store, sent = 1): Promise<void> {
  const until = Date.now() + 40_000;
  while ((await store.countMail()).sent < sent) {
    if (Date.now() > until) throw new Error(`Fewer than ${sent} message(s) marked sent`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
