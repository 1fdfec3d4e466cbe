/**
 * Two PostgreSQL stores (instances) on one new database of a test cluster, with a user, a key
 * and a token, for the tests of instances sharing one database; and waiting for what they see.
 *
 * @module
 */
import {
  openPostgresStore,
  type PostgresStore,
  type PostgresStoreOptions,
} from "../../src/store/postgres/open_postgres_store.ts";
import type { PostgresCluster } from "./postgres_cluster.ts";
import { waitFor } from "./wait_for.ts";

export const NOW = Date.parse("2026-01-01T00:00:00Z");

/** A 32-byte digest stand-in: the text's bytes, zero-padded. */
export function digest(text: string): Uint8Array {
  const bytes = new Uint8Array(32);
  bytes.set(new TextEncoder().encode(text).slice(0, 32));
  return bytes;
}

/** Two stores (instances) on one new database, with a user, a key and a token. */
export async function openTwoInstances(
  cluster: PostgresCluster,
  options: PostgresStoreOptions = {},
) {
  const url = await cluster.createDatabase("instances");
  const [a, b] = await Promise.all([
    openPostgresStore(url, { ...options, applicationName: "keygate-a" }),
    openPostgresStore(url, { ...options, applicationName: "keygate-b" }),
  ]);
  const user = await a.insertUser(
    { email: "ada@example.com", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    { now: NOW, audit: undefined },
  );
  const key = await a.insertApiKey(
    { userId: user.id, keyHash: digest("key"), prefix: "kg_x", label: "" },
    { now: NOW, audit: undefined },
  );
  const tokenId = await a.insertToken({
    tokenHash: digest("token"),
    userId: user.id,
    apiKeyId: key.id,
    issuedAt: NOW,
    expiresAt: NOW + 3_600_000,
    maxLiveTokens: 10,
  }, { audit: undefined });
  const lookup = { tokenHash: digest("token"), keyHash: digest("key"), now: NOW + 1000 };
  return {
    a,
    b,
    user,
    key,
    tokenId,
    lookup,
    url,
    async [Symbol.asyncDispose]() {
      await Promise.all([a.closeStore(), b.closeStore()]);
    },
  };
}

/** Waits (up to 5 s) until every store's change listener is up. */
export async function waitForListeners(...stores: PostgresStore[]): Promise<void> {
  await waitFor("listening", () => stores.every((s) => s.readGrantEpochStats().listening), 5000);
}
