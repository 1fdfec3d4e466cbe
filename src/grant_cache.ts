/**
 * An in-process cache of validated token grants for the secure path, exact
 * even when another process (the admin CLI) writes: before each lookup it
 * asks SQLite whether anything has changed since ({@link Store.readChangeStamp}:
 * `PRAGMA data_version` for other connections, `total_changes()` for this
 * one), and forgets everything if so. Time-based rules stay with the caller
 * (token expiry) or are re-checked here (key expiry).
 *
 * A hit saves two SHA-256 digests and the three-table join. Only valid grants
 * are cached, so unknown tokens cannot fill it.
 *
 * @module
 */
import { hashSecret } from "./credentials.ts";
import type { ChangeStamp, Store, TokenGrant } from "./store.ts";

/** Cached grants before the cache starts afresh. */
export const MAX_CACHED_GRANTS = 100_000;

/** Finds a live grant for a (normalised) API key and token. */
export type GrantFinder = (apiKey: string, token: string, now: number) => TokenGrant | undefined;

/** A cache in front of {@link Store.findTokenGrant}. */
export function createGrantCache(
  store: Pick<Store, "findTokenGrant" | "readChangeStamp">,
  maxEntries = MAX_CACHED_GRANTS,
): GrantFinder {
  const grants = new Map<string, TokenGrant>();
  let seen: ChangeStamp = { dv: -1, tc: -1 };
  return function findGrant(apiKey, token, now) {
    const stamp = store.readChangeStamp();
    if (stamp.dv !== seen.dv || stamp.tc !== seen.tc) {
      grants.clear();
      seen = stamp;
    }
    const cacheKey = apiKey + token;
    const cached = grants.get(cacheKey);
    if (cached !== undefined && (cached.keyExpiresAt === null || cached.keyExpiresAt > now)) {
      return cached;
    }
    const grant = store.findTokenGrant(hashSecret(token), hashSecret(apiKey), now);
    if (grant === undefined) {
      grants.delete(cacheKey);
      return undefined;
    }
    if (grants.size >= maxEntries) grants.clear();
    // Frozen: the same object is handed to every request, and to applications' secure routes.
    grants.set(cacheKey, Object.freeze(grant));
    return grant;
  };
}
