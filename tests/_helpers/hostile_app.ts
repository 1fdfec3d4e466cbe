/**
 * The hostile-input suites' app: the real handler over a SQLite file with one user, key and
 * token, and checks that stored data did not change and nothing was hashed.
 */
import assert from "node:assert/strict";
import type { AppDeps } from "../../src/http/context.ts";
import { createPasswordHasher, type PasswordHasher } from "../../src/passwords/passwords.ts";
import type { ThrottleRules } from "../../src/auth/throttle.ts";
import { BASE, issueToken, secureGet } from "./requests.ts";
import { createTestApp } from "./test_app.ts";

export const EMAIL = "alice@example.org";
export const PASSWORD = "correct horse";
export const CURRENT = "/api/secure/userservice/tokens/current";
export const XML = { "content-type": "application/xml" };
export const JSON_IO = { "content-type": "application/json", accept: "application/json" };
/** Throttling out of the way, for cases about something else. */
export const LENIENT: ThrottleRules = {
  account: { threshold: 1000, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
  client: { threshold: 1000, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
};
export const realHasher = createPasswordHasher();

/** A test app with one user, key and live token, and a count of password checks. */
export async function setup(options: Partial<AppDeps> = {}) {
  let verifies = 0;
  const base = options.hasher ?? realHasher;
  const hasher: PasswordHasher = {
    hash: (password) => base.hash(password),
    verify(passwordHash, password) {
      verifies++;
      return base.verify(passwordHash, password);
    },
    close() {},
  };
  const app = await createTestApp({ throttleRules: LENIENT, ...options, hasher });
  const userId = await app.addUser(EMAIL, PASSWORD);
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  const counts = async () => ({
    users: await app.store.countRows("users"),
    api_keys: await app.store.countRows("api_keys"),
    tokens: await app.store.countRows("tokens"),
  });
  let before = await counts();
  const verifiesBefore = verifies;
  return {
    [Symbol.dispose]() {
      app.close();
      if (base !== realHasher) base.close();
    },
    app,
    userId,
    apiKey,
    token,
    send(body: BodyInit, headers: Record<string, string> = XML, path = "/api/userservice/tokens") {
      return app.handler(new Request(BASE + path, { method: "POST", body, headers }));
    },
    /** No password was checked since setup. */
    assertNotHashed() {
      assert.equal(verifies, verifiesBefore, "a password was checked");
    },
    /** Takes the current row counts as the ones to keep. */
    async mark() {
      before = await counts();
    },
    /** Row counts as after setup (or `mark`), and the setup token still valid. */
    async assertIntact() {
      assert.deepEqual(await counts(), before);
      const response = await secureGet(app.handler, CURRENT, apiKey, token);
      assert.equal(response.status, 200, "the existing token no longer validates");
      await response.body?.cancel();
    },
  };
}

/** The `error_message` of an XML `error_response`, unescaped. */
export function toXmlMessage(xml: string): string {
  const escaped = /<error_message>(.*)<\/error_message>/s.exec(xml)?.[1] ?? "";
  const entities: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
  return escaped.replace(/&(lt|gt|amp|quot|apos);/g, (_, name: string) => entities[name]);
}

/** Headers and body of a response, without the per-request ones. */
export async function fingerprint(response: Response) {
  const headers = [...response.headers].filter(([name]) =>
    name !== "date" && name !== "x-request-id"
  );
  return { status: response.status, headers, body: await response.text() };
}
