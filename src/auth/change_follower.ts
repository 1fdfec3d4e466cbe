/**
 * Follows the store's grant change feed for an in-memory copy of what the store holds: reads
 * the store's position ({@link Store.readGrantEpoch}, synchronous and cheap) and, when it moved,
 * hands each scope learned since the position applied to `apply` — `all` when the store cannot
 * account for every change since (a position too old for its log, or none seen before), so
 * that what cannot be accounted for drops everything. The limiter drops the keys a change of
 * limits touches with it; the grant caches (grant_cache.ts) evict the entries a scope touches.
 *
 * While the store cannot confirm its position (`undefined`), nothing is applied and the
 * position seen stays; the first position confirmed afterwards is compared with it, so the
 * changes in between are applied then.
 *
 * @module
 */
import type { GrantEpoch, GrantScope, Store } from "../store/store.ts";

const ALL: GrantScope = Object.freeze({ kind: "all" });

/** A follower of the grant change feed. */
export interface ChangeFollower {
  /**
   * Applies the scopes learned since the last call; returns the store's position, `undefined`
   * when the store cannot confirm one (then nothing was applied).
   */
  follow(): GrantEpoch | undefined;
}

/**
 * Creates a follower that starts at the store's position now (none confirmed yet: the first
 * position confirmed then applies `all`).
 */
export function createChangeFollower(
  store: Pick<Store, "readGrantEpoch" | "readGrantChanges">,
  apply: (scope: GrantScope) => void,
): ChangeFollower {
  let seen: GrantEpoch | undefined = store.readGrantEpoch();
  return {
    follow() {
      const epoch = store.readGrantEpoch();
      if (epoch === undefined || epoch === seen) return epoch;
      const changes = seen === undefined ? undefined : store.readGrantChanges(seen);
      seen = epoch;
      if (changes === undefined) apply(ALL);
      else for (const scope of changes) apply(scope);
      return epoch;
    },
  };
}
