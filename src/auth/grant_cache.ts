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
import { type BoundedCache, createBoundedCache } from "./bounded_cache.ts";
import { hashSecret } from "./credentials.ts";
import type { GrantEpoch, KeyHolder, Store, TokenGrant, TokenStatus } from "../store/store.ts";

/**
 * Entries per cache (`--grant-cache-size`'s default); beyond it the S3-FIFO policy of
 * bounded_cache.ts evicts. 0 turns the caches off, and every lookup goes to the store.
 */
export const MAX_CACHED_GRANTS = 100_000;

/** Told of a cache once it is made (for its counters in /metrics). */
export type CacheObserver = (cache: BoundedCache<string, unknown>) => void;

/**
 * Finds a live grant for a (normalised) API key and token: synchronously on
 * a cache hit, through the store on a miss.
 */
export type GrantFinder = (
  apiKey: string,
  token: string,
  now: number,
) => TokenGrant | undefined | Promise<TokenGrant | undefined>;

/**
 * The exactness both caches share: before each lookup the store's grant epoch is read, and a
 * move empties the cache; a value read on a miss is kept only if `keep` says so and the epoch
 * did not move while it was read; with no confirmed epoch nothing is served from memory.
 */
function createExactCache<I, V>(
  store: Pick<Store, "readGrantEpoch">,
  options: {
    read(input: I, now: number): Promise<V | undefined>;
    /** Whether a value read may be kept (only values that something must end are). */
    keep(value: V): boolean;
    /** Whether a kept value still holds at `now` (the time rules the epoch does not see). */
    holds(value: V, now: number): boolean;
    maxEntries: number;
    observe?: CacheObserver;
  },
): (key: string, input: I, now: number) => V | undefined | Promise<V | undefined> {
  // Off (size 0): a cache of one entry that is never filled, so that lookups still count.
  const entries = createBoundedCache<string, V>({ maxEntries: Math.max(1, options.maxEntries) });
  options.observe?.(entries as BoundedCache<string, unknown>);
  let seenEpoch: GrantEpoch | undefined;

  async function lookUp(key: string, input: I, now: number, epoch: GrantEpoch | undefined) {
    const found = await options.read(input, now);
    if (found === undefined || !options.keep(found)) {
      entries.delete(key);
      return found;
    }
    // Cache only what was read while the epoch stood still: a change committed meanwhile
    // may have ended it, and the next lookup will see the epoch move.
    if (epoch === undefined || store.readGrantEpoch() !== epoch) return found;
    if (options.maxEntries <= 0) return found; // the cache is off
    entries.set(key, found); // evicts by the policy when full
    return found;
  }

  return function find(key, input, now) {
    const epoch = store.readGrantEpoch();
    if (epoch !== seenEpoch) {
      entries.clear();
      seenEpoch = epoch;
    }
    if (epoch !== undefined) {
      const cached = entries.get(key);
      if (cached !== undefined) {
        if (options.holds(cached, now)) return cached;
        entries.delete(key); // expired meanwhile: read again below
      }
    }
    return lookUp(key, input, now, epoch);
  };
}

/** A cache in front of {@link Store.findTokenGrant}. */
export function createGrantCache(
  store: Pick<Store, "findTokenGrant" | "readGrantEpoch">,
  maxEntries = MAX_CACHED_GRANTS,
  observe?: CacheObserver,
): GrantFinder {
  const find = createExactCache<{ apiKey: string; token: string }, TokenGrant>(store, {
    async read({ apiKey, token }, now) {
      const found = await store.findTokenGrant({
        tokenHash: hashSecret(token),
        keyHash: hashSecret(apiKey),
        now,
      });
      // Frozen: the same object is handed to every request, and to applications' secure routes.
      return found === undefined ? undefined : Object.freeze(found);
    },
    keep: () => true,
    holds: (grant, now) => grant.keyExpiresAt === null || grant.keyExpiresAt > now,
    maxEntries,
    observe,
  });
  return (apiKey, token, now) => find(apiKey + token, { apiKey, token }, now);
}

/**
 * Finds a token's status for introspection: synchronously on a cache hit,
 * through the store on a miss.
 */
export type TokenStatusFinder = (
  token: string,
  now: number,
) => TokenStatus | undefined | Promise<TokenStatus | undefined>;

/**
 * A cache in front of {@link Store.findTokenStatus}, exact like the grant
 * cache: only live tokens are kept (so unknown or ended tokens cannot fill
 * it), anything that may end one moves the epoch and empties it, and expiry
 * (the token's, capped by its key's) stays the caller's check. A hit saves a
 * SHA-256 digest and the three-table join of every repeated introspection.
 */
export function createTokenStatusCache(
  store: Pick<Store, "findTokenStatus" | "readGrantEpoch">,
  maxEntries = MAX_CACHED_GRANTS,
  observe?: CacheObserver,
): TokenStatusFinder {
  const find = createExactCache<string, TokenStatus>(store, {
    async read(token, now) {
      const found = await store.findTokenStatus(hashSecret(token), now);
      return found === undefined ? undefined : Object.freeze(found);
    },
    keep: (status) => status.live,
    holds: () => true,
    maxEntries,
    observe,
  });
  return (token, now) => find(token, token, now);
}

/** Finds the holder of a usable API key: synchronously on a cache hit, through the store on a miss. */
export type KeyHolderFinder = (
  apiKey: string,
  now: number,
) => KeyHolder | undefined | Promise<KeyHolder | undefined>;

/**
 * A cache in front of {@link Store.findKeyHolder}, for requests authenticated
 * by API key alone (introspection, revocation, forward-auth of public paths).
 * Exact like the grant cache: revoking, disabling or rotating a key, or
 * disabling its user, moves the epoch and empties it; only usable keys are
 * kept (unknown keys cannot fill it), with their expiry, read on the miss
 * and checked on every hit. A hit saves a SHA-256 digest and the join.
 */
export function createKeyHolderCache(
  store: Pick<Store, "findKeyHolder" | "findApiKeyById" | "readGrantEpoch">,
  maxEntries = MAX_CACHED_GRANTS,
  observe?: CacheObserver,
): KeyHolderFinder {
  const find = createExactCache<string, { holder: KeyHolder; keyExpiresAt: number | null }>(
    store,
    {
      async read(apiKey, now) {
        const holder = await store.findKeyHolder(hashSecret(apiKey), now);
        if (holder === undefined) return undefined;
        // The holder does not carry the key's expiry; a write between the two reads moves the
        // epoch, and then nothing read here is kept.
        const key = await store.findApiKeyById(holder.apiKeyId);
        if (key === undefined) return undefined;
        return { holder: Object.freeze(holder), keyExpiresAt: key.expiresAt };
      },
      keep: () => true,
      holds: (entry, now) => entry.keyExpiresAt === null || entry.keyExpiresAt > now,
      maxEntries,
      observe,
    },
  );
  return (apiKey, now) => {
    const found = find(apiKey, apiKey, now);
    return found instanceof Promise ? found.then((entry) => entry?.holder) : found?.holder;
  };
}
