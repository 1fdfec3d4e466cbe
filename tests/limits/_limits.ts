/**
 * What the tests of rates and quotas set up: an app on the backend under test with one user,
 * Alice, her API key and a token, and the dependencies that change limits as the CLI does.
 *
 * @module
 */
import { issueToken } from "../_helpers/requests.ts";
import { createTestApp, type TestApp, type TestAppOptions } from "../_helpers/test_app.ts";

/** An app with Alice, her API key (and its id) and a token issued with it. */
export async function setUpLimitsApp(options: TestAppOptions = {}) {
  const app = await createTestApp(options);
  const userId = await app.addUser("alice@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  const keyId = (await app.store.listApiKeys(userId))[0].id;
  return { app, userId, apiKey, token, keyId };
}

/** What `setLimit` needs, acting as the CLI. */
export function limitChangeDeps(app: TestApp) {
  return { store: app.store, clock: app.clock, actor: "cli:test" };
}
