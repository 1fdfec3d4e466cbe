/**
 * An in-process cache of validated token grants for the secure path, exact
 * even when another process (the admin CLI) writes. Before each lookup it
 * checks, cheapest first, whether anything may have changed:
 *
 * 1. the commit count in the WAL index ({@link Store.readCommitCount}), a
 *    load from shared memory: unchanged means no connection has committed,
 *    and the cache is current;
 * 2. otherwise `PRAGMA data_version` ({@link Store.readDataVersion}): it
 *    moves only when another connection committed, and then the cache is
 *    emptied;
 * 3. this connection's own writes that may end a grant
 *    ({@link Store.readGrantWrites}) empty it too. Its other writes (a new
 *    token, a key's last use, audit rows) do not, so that logins do not
 *    cost every secure request a cache miss.
 *
 * Time-based rules stay with the caller (token expiry) or are re-checked
 * here (key expiry).
 *
 * A hit saves two SHA-256 digests and the three-table join. Only valid grants
 * are cached, so unknown tokens cannot fill it.
 *
 * @module
 */
import { hashSecret } from "./credentials.ts";
import type { Store, TokenGrant } from "../store/sqlite/store.ts";

/** Cached grants before the cache starts afresh. */
export const MAX_CACHED_GRANTS = 100_000;

/** Finds a live grant for a (normalised) API key and token. */
export type GrantFinder = (apiKey: string, token: string, now: number) => TokenGrant | undefined;

/** A cache in front of {@link Store.findTokenGrant}. */
export function createGrantCache(
  store: Pick<
    Store,
    "findTokenGrant" | "readCommitCount" | "readDataVersion" | "readGrantWrites"
  >,
  maxEntries = MAX_CACHED_GRANTS,
): GrantFinder {
  const grants = new Map<string, TokenGrant>();
  let seenCommits: number | undefined;
  let seenDataVersion = -1;
  let seenGrantWrites = -1;

  /** Empties the cache if anything that may end a grant has been committed since last time. */
  function catchUp(): void {
    const grantWrites = store.readGrantWrites();
    // Read before data_version: a commit in between is then seen next time.
    const commits = store.readCommitCount();
    if (commits !== undefined && commits === seenCommits && grantWrites === seenGrantWrites) return;
    const dataVersion = store.readDataVersion();
    if (dataVersion !== seenDataVersion || grantWrites !== seenGrantWrites) grants.clear();
    seenCommits = commits;
    seenDataVersion = dataVersion;
    seenGrantWrites = grantWrites;
  }

  return function findGrant(apiKey, token, now) {
    catchUp();
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
