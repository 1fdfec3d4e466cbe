/**
 * A test app with a user who holds a key and a token, and a resource server
 * (billing@example.org) holding a resource-server key (`--introspect`): what
 * introspection, revocation and OAuth client tests start from.
 */
import { generateApiKey, hashSecret, toKeyPrefix } from "../../src/auth/credentials.ts";
import { issueToken } from "./requests.ts";
import { createTestApp, type TestAppOptions } from "./test_app.ts";

/** Sets up alice (timeout `timeoutSeconds`, or the default) and the resource server's key. */
export async function setUpResourceServer(
  timeoutSeconds: number | null = null,
  options: TestAppOptions = {},
) {
  const app = await createTestApp(options);
  const userId = await app.addUser("alice@example.org", "pw", timeoutSeconds);
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  const serverId = await app.addUser("billing@example.org", "pw");
  const resourceKey = generateApiKey();
  await app.store.insertApiKey({
    userId: serverId,
    keyHash: hashSecret(resourceKey),
    prefix: toKeyPrefix(resourceKey),
    label: "billing service",
    introspect: true,
  }, { now: app.clock.now(), audit: undefined });
  return {
    app,
    userId,
    apiKey,
    token,
    resourceKey,
    /** The id of alice's key. */
    keyId: (await app.store.listApiKeys(userId))[0].id,
    /** The id of the resource server's key (its OAuth client id). */
    resourceKeyId: (await app.store.listApiKeys(serverId))[0].id,
  };
}
