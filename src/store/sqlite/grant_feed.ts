/**
 * {@link GrantFeedStore} on SQLite: the connection's change record and shared WAL index
 * (connection.ts, wal_index.ts) already keep the feed; this names the group.
 *
 * @module
 */
import type { GrantFeedStore } from "../store.ts";
import type { Connection } from "./connection.ts";

export function createGrantFeedStore(conn: Connection): GrantFeedStore {
  return {
    readGrantEpoch: conn.readGrantEpoch,
    readGrantChanges: conn.readGrantChanges,
    readGrantInvalidations: conn.readGrantInvalidations,
  };
}
