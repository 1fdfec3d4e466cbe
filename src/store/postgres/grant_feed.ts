/**
 * {@link GrantFeedStore} on PostgreSQL: the grant-epoch watcher (grant_epoch.ts) keeps the
 * feed; this names the group.
 *
 * @module
 */
import type { GrantFeedStore } from "../store.ts";
import type { GrantEpochWatcher } from "./grant_epoch.ts";

export function createGrantFeedStore(watcher: GrantEpochWatcher): GrantFeedStore {
  return {
    readGrantEpoch: () => watcher.read(),
    readGrantChanges: (since) => watcher.changesSince(since),
    readGrantInvalidations: () => watcher.invalidations(),
  };
}
