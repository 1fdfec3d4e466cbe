/**
 * An in-process cache of validated token grants for the secure path, exact
 * even when another process (the admin CLI, another instance) writes.
 *
 * Before each lookup it reads the store's grant change feed
 * ({@link Store.readGrantEpoch}, synchronous and cheap): when the epoch has
 * moved since the last lookup, something that may end a grant has been
 * committed, and the cache empties itself. A grant read on a miss is cached
 * only if the epoch did not move while it was read. When the store cannot
 * confirm freshness (`undefined`), nothing is served from memory: every
 * request goes to the store, which fails closed while it cannot answer.
 *
 * A hit is synchronous and costs the epoch read, one map lookup and the key
 * expiry check; it saves two SHA-256 digests and the three-table join. Time
 * rules stay with the caller (token expiry) or are re-checked here (key
 * expiry). Only valid grants are cached, so unknown tokens cannot fill it.
 *
 * @module
 */
import { hashSecret } from "./credentials.ts";
import type { GrantEpoch, Store, TokenGrant } from "../store/store.ts";

/** Cached grants before the cache starts afresh. */
export const MAX_CACHED_GRANTS = 100_000;

/**
 * Finds a live grant for a (normalised) API key and token: synchronously on
 * a cache hit, through the store on a miss.
 */
export type GrantFinder = (
  apiKey: string,
  token: string,
  now: number,
) => TokenGrant | undefined | Promise<TokenGrant | undefined>;

/** A cache in front of {@link Store.findTokenGrant}. */
export function createGrantCache(
  store: Pick<Store, "findTokenGrant" | "readGrantEpoch">,
  maxEntries = MAX_CACHED_GRANTS,
): GrantFinder {
  const grants = new Map<string, TokenGrant>();
  let seenEpoch: GrantEpoch | undefined;

  async function lookUp(
    apiKey: string,
    token: string,
    now: number,
    epoch: GrantEpoch | undefined,
  ): Promise<TokenGrant | undefined> {
    const cacheKey = apiKey + token;
    const found = await store.findTokenGrant({
      tokenHash: hashSecret(token),
      keyHash: hashSecret(apiKey),
      now,
    });
    if (found === undefined) {
      grants.delete(cacheKey);
      return undefined;
    }
    // Frozen: the same object is handed to every request, and to applications' secure routes.
    const grant = Object.freeze(found);
    // Cache only what was read while the epoch stood still: a change committed meanwhile
    // may have ended this grant, and the next lookup will see the epoch move.
    if (epoch === undefined || store.readGrantEpoch() !== epoch) return grant;
    if (grants.size >= maxEntries) grants.clear();
    grants.set(cacheKey, grant);
    return grant;
  }

  return function findGrant(apiKey, token, now) {
    const epoch = store.readGrantEpoch();
    if (epoch !== seenEpoch) {
      grants.clear();
      seenEpoch = epoch;
    }
    if (epoch !== undefined) {
      const cached = grants.get(apiKey + token);
      if (cached !== undefined && (cached.keyExpiresAt === null || cached.keyExpiresAt > now)) {
        return cached;
      }
    }
    return lookUp(apiKey, token, now, epoch);
  };
}
