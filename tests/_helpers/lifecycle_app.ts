/**
 * An app with one user (alice@example.org) that the admin CLI drives in-process, on the
 * app's database and clock, and the token checks of the key and token lifecycle tests
 * (tests/e2e/cli/key_lifecycle_test.ts, token_cutoff_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { runAdmin } from "./admin_cli.ts";
import type { PasswordHasher } from "../../src/passwords/passwords.ts";
import { assertError, jsonAuthRequest, postToken, secureGet } from "./requests.ts";
import { createTestApp, type TestApp } from "./test_app.ts";

export const CURRENT = "/api/secure/userservice/tokens/current";
export const EMAIL = "alice@example.org";
export const PASSWORD = "correct horse";
export const HOUR = 3600_000;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Runs the admin CLI in-process on the app's database and clock. */
export function admin(app: TestApp, args: string[], password = "new password") {
  return runAdmin(app.dbPath, args, { password, env: { USER: "tester" }, clock: app.clock });
}

export async function setup(options: { trackKeyUsage?: boolean; hasher?: PasswordHasher } = {}) {
  const app = await createTestApp(options);
  const userId = await app.addUser(EMAIL, PASSWORD);
  return { app, userId };
}

export async function createKey(app: TestApp, ...flags: string[]): Promise<string> {
  const created = await admin(app, ["key", "create", EMAIL, ...flags]);
  assert.equal(created.code, 0, created.err);
  assert.match(created.lastLine, UUID);
  return created.lastLine;
}

export async function listKeys(app: TestApp, ...args: string[]) {
  const listed = await admin(app, ["key", "list", ...args, "--json"]);
  assert.equal(listed.code, 0, listed.err);
  return JSON.parse(listed.out) as Record<string, string | number | null>[];
}

export function requestToken(app: TestApp, apiKey: string): Promise<Response> {
  return postToken(app.handler, jsonAuthRequest(EMAIL, PASSWORD, apiKey), {
    "content-type": "application/json",
    accept: "application/json",
  });
}

export async function assertTokenWorks(app: TestApp, apiKey: string, token: string) {
  const response = await secureGet(app.handler, CURRENT, apiKey, token, {
    accept: "application/json",
  });
  assert.equal(response.status, 200, await response.clone().text());
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  return (await response.json()).token_info as { email: string; expires_at: string };
}

export async function assertTokenFails(app: TestApp, apiKey: string, token: string) {
  await assertError(await secureGet(app.handler, CURRENT, apiKey, token), 401, "invalid_token");
}
