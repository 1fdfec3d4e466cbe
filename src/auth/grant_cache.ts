/**
 * In-process caches of validated grants for the secure path (grants, token statuses, key
 * holders), exact even when another process (the admin CLI, another instance) writes, and
 * targeted: a change evicts the entries it touches, not everything.
 *
 * Every grant-ending write records its scope (one token, one API key, one user, or all) in the
 * database, in its own transaction; the store learns those scopes (from the change record,
 * from its own commits, from sibling workers) and numbers them ({@link Store.readGrantEpoch}).
 * Before each lookup a cache reads that position (synchronous and cheap); when it moved, it
 * asks {@link Store.readGrantChanges} what changed and evicts exactly the entries whose token,
 * key or user a scope names, through three secondary indexes (`all`, or a position too old for
 * the store to say: everything). A value read on a miss is kept only if no change touching its
 * token, key or user (or all) was learned while it was read. When the store cannot confirm
 * freshness (`undefined`), nothing is served from memory: every request goes to the store,
 * which fails closed while it cannot answer.
 *
 * What proves the exactness on each failure (docs/architecture.md argues it case by case):
 * - **a lost notification** (PostgreSQL): notifications only prompt a poll, and the poll reads
 *   the change record from the position seen, so nothing learned depends on one arriving;
 * - **a reconnect**: the listener's reconnect polls; the record covers what was missed;
 * - **a restored backup, a hand-made epoch bump, a pruned record, a schema change**: the store
 *   cannot account for every position since the one seen, learns `all`, and the caches empty.
 *
 * A hit is synchronous and costs the position read, one map lookup and the key expiry check;
 * it saves two SHA-256 digests and the three-table join. Time rules stay with the caller (token
 * expiry) or are re-checked here (key expiry). Only valid grants are cached, so unknown tokens
 * cannot fill it.
 *
 * @module
 */
import { type BoundedCache, createBoundedCache } from "./bounded_cache.ts";
import { hashSecret } from "./credentials.ts";
import { createSubjectIndex, type EntrySubjects } from "./grant_subject_index.ts";
import { createChangeFollower } from "./change_follower.ts";
import type {
  GrantEpoch,
  GrantInvalidations,
  GrantScope,
  KeyHolder,
  Store,
  TokenGrant,
  TokenStatus,
} from "../store/store.ts";

/**
 * Entries per cache (`--grant-cache-size`'s default); beyond it the S3-FIFO policy of
 * bounded_cache.ts evicts. 0 turns the caches off, and every lookup goes to the store.
 */
export const MAX_CACHED_GRANTS = 100_000;

/** Told of a cache once it is made (for its counters in /metrics). */
export type CacheObserver = (cache: BoundedCache<string, unknown>) => void;

/** What a cache did, for tests and metrics. */
export interface CacheStats {
  /** Entries now. */
  size: number;
  /** Lookups answered from memory. */
  hits: number;
  /** Lookups that went to the store. */
  misses: number;
  /** Entries evicted by an invalidation, by the scope that evicted them. */
  invalidated: GrantInvalidations;
  /** Entries dropped to make room. */
  evicted: number;
  /** Values read on a miss and not kept, because a change touching them was learned meanwhile. */
  notKept: number;
}

/** A cache's lookup, with its statistics. */
export interface CacheInspection {
  stats(): CacheStats;
}

/**
 * Finds a live grant for a (normalised) API key and token: synchronously on
 * a cache hit, through the store on a miss.
 */
export type GrantFinder =
  & ((
    apiKey: string,
    token: string,
    now: number,
  ) => TokenGrant | undefined | Promise<TokenGrant | undefined>)
  & CacheInspection;

/** Whether `scope` touches an entry with these subjects. */
function touches(scope: GrantScope, subjects: EntrySubjects): boolean {
  switch (scope.kind) {
    case "all":
      return true;
    case "token":
      return subjects.tokenId === scope.id;
    case "key":
      return subjects.apiKeyId === scope.id;
    case "user":
      return subjects.userId === scope.id;
  }
}

/**
 * The exactness the three caches share: before each lookup the store's position is read and
 * the scopes learned since are evicted; a value read on a miss is kept only if `keep` says so
 * and no change touching it was learned while it was read; with no confirmed position nothing
 * is served from memory.
 */
function createExactCache<I, V>(
  store: Pick<Store, "readGrantEpoch" | "readGrantChanges">,
  options: {
    read(input: I, now: number): Promise<V | undefined>;
    /** Whether a value read may be kept (only values that something must end are). */
    keep(value: V): boolean;
    /** Whether a kept value still holds at `now` (the time rules the record does not see). */
    holds(value: V, now: number): boolean;
    /** The grants a value depends on. */
    subjects(value: V): EntrySubjects;
    maxEntries: number;
    observe?: CacheObserver;
  },
): ((key: string, input: I, now: number) => V | undefined | Promise<V | undefined>) & {
  stats(): CacheStats;
} {
  const subjectIndex = createSubjectIndex();
  // Off (size 0): a cache of one entry that is never filled, so that lookups still count.
  const entries = createBoundedCache<string, V>({
    maxEntries: Math.max(1, options.maxEntries),
    // Evicted by the policy to make room: the secondary indexes follow.
    onEvict(key, value) {
      evicted++;
      unindex(key, value);
    },
  });
  options.observe?.(entries as BoundedCache<string, unknown>);
  let hits = 0;
  let misses = 0;
  let evicted = 0;
  let notKept = 0;
  const invalidated: GrantInvalidations = { token: 0, key: 0, user: 0, all: 0 };

  function index(key: string, value: V): void {
    subjectIndex.add(key, options.subjects(value));
  }

  function unindex(key: string, value: V): void {
    subjectIndex.delete(key, options.subjects(value));
  }

  function remove(key: string): boolean {
    const value = entries.peek(key);
    if (value === undefined) return false;
    entries.delete(key);
    unindex(key, value);
    return true;
  }

  function invalidate(scope: GrantScope): void {
    if (scope.kind === "all") {
      invalidated.all += entries.size;
      entries.clear();
      subjectIndex.clear();
      return;
    }
    for (const key of subjectIndex.keysOf(scope.kind, scope.id)) {
      if (remove(key)) invalidated[scope.kind]++;
    }
  }

  // Evicts the scopes learned since the position last seen (`all` where the log cannot say).
  const follower = createChangeFollower(store, invalidate);

  async function lookUp(key: string, input: I, now: number, started: GrantEpoch | undefined) {
    misses++;
    const found = await options.read(input, now);
    if (found === undefined || !options.keep(found)) {
      remove(key);
      return found;
    }
    if (started === undefined || options.maxEntries <= 0) return found;
    const epoch = follower.follow();
    if (epoch === undefined) return found;
    // Keep only what was read while nothing relevant moved: a change to its token, key or user
    // learned meanwhile may have ended it (or committed just before the read, unseen by it).
    if (epoch !== started) {
      const changes = store.readGrantChanges(started);
      const subjects = options.subjects(found);
      if (changes === undefined || changes.some((scope) => touches(scope, subjects))) {
        notKept++;
        remove(key);
        return found;
      }
    }
    remove(key);
    entries.set(key, found);
    index(key, found);
    return found;
  }

  function find(key: string, input: I, now: number) {
    const epoch = follower.follow();
    if (epoch !== undefined) {
      const cached = entries.get(key);
      if (cached !== undefined && options.holds(cached, now)) {
        hits++;
        return cached;
      }
    }
    return lookUp(key, input, now, epoch);
  }

  return Object.assign(find, {
    stats: (): CacheStats => ({
      size: entries.size,
      hits,
      misses,
      invalidated: { ...invalidated },
      evicted,
      notKept,
    }),
  });
}

/** A cache in front of {@link Store.findTokenGrant}. */
export function createGrantCache(
  store: Pick<Store, "findTokenGrant" | "readGrantEpoch" | "readGrantChanges">,
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
    subjects: (grant) => grant,
    maxEntries,
    observe,
  });
  return Object.assign(
    (apiKey: string, token: string, now: number) => find(apiKey + token, { apiKey, token }, now),
    { stats: find.stats },
  );
}

/**
 * Finds a token's status for introspection: synchronously on a cache hit,
 * through the store on a miss.
 */
export type TokenStatusFinder =
  & ((
    token: string,
    now: number,
  ) => TokenStatus | undefined | Promise<TokenStatus | undefined>)
  & CacheInspection;

/**
 * A cache in front of {@link Store.findTokenStatus}, exact like the grant
 * cache: only live tokens are kept (so unknown or ended tokens cannot fill
 * it), anything that may end one is recorded with its token, key or user and
 * evicts it, and expiry (the token's, capped by its key's) stays the caller's
 * check. A hit saves a SHA-256 digest and the three-table join of every
 * repeated introspection.
 */
export function createTokenStatusCache(
  store: Pick<Store, "findTokenStatus" | "readGrantEpoch" | "readGrantChanges">,
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
    subjects: (status) => status,
    maxEntries,
    observe,
  });
  return Object.assign((token: string, now: number) => find(token, token, now), {
    stats: find.stats,
  });
}

/** Finds the holder of a usable API key: synchronously on a cache hit, through the store on a miss. */
export type KeyHolderFinder =
  & ((
    apiKey: string,
    now: number,
  ) => KeyHolder | undefined | Promise<KeyHolder | undefined>)
  & CacheInspection;

/**
 * A cache in front of {@link Store.findKeyHolder}, for requests authenticated
 * by API key alone (introspection, revocation, forward-auth of public paths).
 * Exact like the grant cache: revoking, disabling or rotating a key, or
 * changing its user, is recorded with the key or the user and evicts it; only
 * usable keys are kept (unknown keys cannot fill it), with their expiry, read
 * with the holder in the miss's one store read and checked on every hit. A hit
 * saves a SHA-256 digest and the join.
 */
export function createKeyHolderCache(
  store: Pick<Store, "findKeyHolder" | "readGrantEpoch" | "readGrantChanges">,
  maxEntries = MAX_CACHED_GRANTS,
  observe?: CacheObserver,
): KeyHolderFinder {
  const find = createExactCache<string, KeyHolder>(store, {
    async read(apiKey, now) {
      const holder = await store.findKeyHolder(hashSecret(apiKey), now);
      return holder === undefined ? undefined : Object.freeze(holder);
    },
    keep: () => true,
    holds: (holder, now) => holder.keyExpiresAt === null || holder.keyExpiresAt > now,
    subjects: (holder) => holder,
    maxEntries,
    observe,
  });
  return Object.assign((apiKey: string, now: number) => find(apiKey, apiKey, now), {
    stats: find.stats,
  });
}
