/**
 * The SQLite connection's grant change feed (see `GrantFeedStore`): what the connection's
 * `readGrantEpoch` reads, cheapest first, and the bound on the change record it keeps. A helper
 * of connection.ts, not a method group (grant_feed.ts is the group).
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import {
  ALL,
  createGrantChangeLog,
  type RecordCursor,
  toRecordedScopes,
} from "../grant_change_log.ts";
import type { GrantEpoch, GrantInvalidations, GrantScope } from "../store.ts";
import { toStoreError } from "./errors.ts";
import type { CommitCounter } from "./wal_index.ts";

/** Rows of the change record one read takes; a store further behind drops its caches. */
const RECORD_READ_ROWS = 10_000;

/** What the feed reads besides the database. */
export interface ChangeFeedOptions {
  /** The commit counter in SQLite's shared WAL index (wal_index.ts). */
  commits: CommitCounter;
  /** Rows of the change record kept. */
  recordRows: number;
  /** The connection's own grant-ending writes so far. */
  readGrantWrites(): number;
}

/** A connection's view of the change record. */
export interface ChangeFeed {
  readGrantEpoch(): GrantEpoch;
  readGrantChanges(since: GrantEpoch): readonly GrantScope[] | undefined;
  readGrantInvalidations(): GrantInvalidations;
  /** `PRAGMA data_version` reads so far (the WAL index spares the rest). */
  readDataVersionReads(): number;
  /** Keeps the change record to its bound, in a transaction that wrote to it. */
  pruneChanges(): void;
}

export function createChangeFeed(db: DatabaseSync, options: ChangeFeedOptions): ChangeFeed {
  const { commits } = options;
  const dataVersion = db.prepare("PRAGMA data_version");
  // The grant change feed. Cheapest first: the commit count in the WAL index (a load from
  // shared memory; unchanged means no connection has committed); otherwise
  // `PRAGMA data_version`, which moves only when another connection committed; and this
  // connection's own writes. When something may have moved, the change record is read from
  // the position seen (an indexed range, usually empty: a login moves the WAL index but records
  // nothing), and the scopes found are learned. See grant_change_log.ts for what cannot be
  // accounted for (a gap, a restore): it is learned as `all`.
  const log = createGrantChangeLog();
  const recordAfter = db.prepare(
    `SELECT position, scope, subject, tag FROM grant_changes WHERE position >= ?
     ORDER BY position LIMIT ?`,
  );
  const recordHead = db.prepare(
    "SELECT position, tag FROM grant_changes ORDER BY position DESC LIMIT 1",
  );
  const schemaVersion = db.prepare("PRAGMA schema_version");
  const pruneRecord = db.prepare(
    `DELETE FROM grant_changes
     WHERE position <= (SELECT max(position) FROM grant_changes) - ?`,
  );
  let seenCommits: number | undefined;
  let seenDataVersion = -1;
  let seenGrantWrites = -1;
  let seenSchema: number;
  let dataVersionReads = 0;

  function readHead(): RecordCursor {
    const row = recordHead.get() as { position: number; tag: number } | undefined;
    return row === undefined
      ? { position: 0, tag: null }
      : { position: row.position, tag: row.tag };
  }

  let cursor = readHead();
  seenSchema = (schemaVersion.get() as { schema_version: number }).schema_version;

  /** Reads the change record after the position seen, in one statement (one snapshot). */
  function learnFromRecord(): void {
    const rows = recordAfter.all(cursor.position, RECORD_READ_ROWS + 1) as unknown as {
      position: number;
      scope: string;
      subject: number | null;
      tag: number;
    }[];
    const atCursor = rows.length > 0 && rows[0].position === cursor.position
      ? rows.shift()
      : undefined;
    const truncated = rows.length > RECORD_READ_ROWS - 1;
    const last = rows.at(-1) ?? atCursor;
    const head = truncated || last === undefined
      ? readHead()
      : { position: last.position, tag: last.tag };
    const read = toRecordedScopes(cursor, {
      head,
      tagAtCursor: atCursor?.tag ?? null,
      rows,
      truncated,
    });
    for (const scope of read.scopes) log.push(scope);
    cursor = read.cursor;
  }

  function readGrantEpoch(): GrantEpoch {
    const writes = options.readGrantWrites();
    // Read before data_version: a commit in between is then seen next time.
    const count = commits.read();
    if (count !== undefined && count === seenCommits && writes === seenGrantWrites) {
      return log.position();
    }
    let version: number;
    dataVersionReads++;
    try {
      version = (dataVersion.get() as { data_version: number }).data_version;
      if (version !== seenDataVersion || writes !== seenGrantWrites) {
        // Another connection may have changed the schema (a migration): nothing cached from
        // the old one is trusted.
        const schema = (schemaVersion.get() as { schema_version: number }).schema_version;
        if (schema !== seenSchema) log.push(ALL);
        seenSchema = schema;
        learnFromRecord();
      }
    } catch (error) {
      throw toStoreError(error);
    }
    seenCommits = count;
    seenDataVersion = version;
    seenGrantWrites = writes;
    return log.position();
  }

  return {
    readGrantEpoch,
    readGrantChanges: (since) => log.since(since),
    readGrantInvalidations: () => log.counts(),
    readDataVersionReads: () => dataVersionReads,
    pruneChanges() {
      pruneRecord.run(options.recordRows);
    },
  };
}
