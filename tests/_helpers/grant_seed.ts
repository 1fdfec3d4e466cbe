/**
 * A user, an API key and a token in a store (`seed`), and more tokens for them
 * (`issueFor`): the state the cache tests (tests/auth/grant_cache*_test.ts) and the SQLite
 * durability tests start from.
 *
 * @module
 */
import { hashSecret } from "../../src/auth/credentials.ts";
import type { Store } from "../../src/store/store.ts";

export const KEY = "0f8fad5b-d9cb-469f-a165-70867728950e";
export const TOKEN = "a".repeat(40);
export const NO_AUDIT = { audit: undefined };

/** The user a@b.org, its key {@link KEY} (expiring as given) and its token {@link TOKEN}. */
export async function seed(store: Store, keyExpiresAt: number | null = null) {
  const user = await store.insertUser(
    { email: "a@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
    { now: 1000, ...NO_AUDIT },
  );
  const key = await store.insertApiKey(
    {
      userId: user.id,
      keyHash: hashSecret(KEY),
      prefix: "0f8fad5b",
      label: "",
      expiresAt: keyExpiresAt,
    },
    { now: 1000, ...NO_AUDIT },
  );
  await issueFor(store, { user, key }, TOKEN, 1000);
  return { user, key };
}

/** Issues one more token (valid until 90,000) to the seeded user and key. */
export function issueFor(
  store: Store,
  { user, key }: { user: { id: number }; key: { id: number } },
  token: string,
  issuedAt: number,
  maxLiveTokens = 100,
) {
  return store.insertToken({
    tokenHash: hashSecret(token),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt,
    expiresAt: 90_000,
    maxLiveTokens,
  }, NO_AUDIT);
}
