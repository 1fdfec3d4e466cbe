/**
 * A connection's write transactions: `BEGIN IMMEDIATE` to `COMMIT` around a write's function,
 * the bulk transaction that every write joins while it is open (`runBulk`), and the readiness
 * probe's. A commit prunes the change record when a grant ended in it, and says whether one may
 * have and whether a grant-ending statement ran at all, which is what decides the WAL sync a
 * write waits for (connection.ts); the counts come from the connection's counted statements.
 *
 * Nothing here awaits inside a transaction but the bulk one, whose caller is alone on the
 * connection by contract.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { refuseAfterSyncFailure, type WalSyncGroup } from "./wal_sync.ts";

/** Grant-ending statements run on a connection (see connection.ts, `Connection.sql`). */
export interface GrantCounts {
  /** Those that changed a row: they evict caches and move the change feed. */
  writes: number;
  /** Those run, whether or not they changed a row. */
  runs: number;
}

/** What a commit says of the grants its transaction touched. */
export interface CommitOutcome {
  /** A row changed through a grant-ending statement: a grant may have ended. */
  endedGrants: boolean;
  /** A grant-ending statement ran at all. */
  ranGrants: boolean;
}

/** What {@link createTransactions} needs of its connection. */
export interface TransactionDeps {
  db: DatabaseSync;
  /** The connection's counts, read before and after each transaction. */
  grants: Readonly<GrantCounts>;
  /** Prunes the change record (change_feed.ts), in the transaction that ended a grant. */
  pruneChanges(): void;
  /** The WAL sync group (durability `"grants"`), if any. */
  syncWal: WalSyncGroup | undefined;
}

/** Creates the transactions of one connection. */
export function createTransactions(deps: TransactionDeps) {
  const { db, grants, syncWal } = deps;
  /** Whether a bulk transaction (runBulk) is open: writes join it. */
  let bulk = false;

  /**
   * Opens a write transaction; its `commit` prunes the change record if a grant ended in it and
   * says what it touched; its `rollback` ends it if SQLite has not already.
   */
  function begin() {
    db.exec("BEGIN IMMEDIATE");
    const writesBefore = grants.writes;
    const runsBefore = grants.runs;
    return {
      commit(): CommitOutcome {
        const endedGrants = grants.writes !== writesBefore;
        if (endedGrants) deps.pruneChanges();
        db.exec("COMMIT");
        return { endedGrants, ranGrants: grants.runs !== runsBefore };
      },
      rollback(): void {
        if (db.isTransaction) db.exec("ROLLBACK");
      },
    };
  }

  /** Runs `fn` in a transaction and commits it, unsynced (see {@link begin}'s `commit`). */
  function commit<T>(fn: () => T): CommitOutcome & { result: T } {
    // A write joins an open bulk transaction, which commits (and syncs) for it (runBulk), in a
    // savepoint of its own: a write that fails leaves nothing, as on its own.
    if (bulk) {
      // SQLite may have rolled the whole bulk back (a full disk): refuse rather than autocommit.
      if (!db.isTransaction) throw new Error("The bulk transaction was rolled back");
      return { result: inSavepoint(db, fn), endedGrants: false, ranGrants: false };
    }
    // Otherwise only a write and the readiness probe commit, never inside another transaction:
    // a nested commit would skip its sync.
    if (db.isTransaction) throw new Error("A transaction is open already");
    const transaction = begin();
    try {
      const result = fn();
      return { result, ...transaction.commit() };
    } catch (error) {
      transaction.rollback();
      throw error;
    }
  }

  return {
    commit,

    /** The readiness probe's transaction: its statements keep grants, so it owes no sync. */
    probeTransaction(probe: () => void): void {
      const runsBefore = grants.runs;
      commit(() => {
        probe();
        if (grants.runs !== runsBefore) throw new Error("The readiness probe ran a grant write");
      });
    },

    /** See `Connection.runBulk`. */
    async runBulk<T>(fn: () => Promise<T>): Promise<T> {
      if (db.isTransaction) throw new Error("A transaction is open already");
      refuseAfterSyncFailure(syncWal);
      const transaction = begin();
      bulk = true;
      try {
        const result = await fn();
        const { endedGrants, ranGrants } = transaction.commit();
        bulk = false;
        if (syncWal !== undefined && (endedGrants || ranGrants)) await syncWal.afterCommit();
        return result;
      } catch (error) {
        transaction.rollback();
        throw error;
      } finally {
        bulk = false;
      }
    },
  };
}

/**
 * Runs `fn` in a savepoint of `db`'s open transaction, rolled back to if `fn` throws (unless
 * SQLite rolled the whole transaction back already: a full disk, say).
 */
function inSavepoint<T>(db: DatabaseSync, fn: () => T): T {
  db.exec("SAVEPOINT joined_write");
  try {
    const result = fn();
    db.exec("RELEASE joined_write");
    return result;
  } catch (error) {
    if (db.isTransaction) {
      db.exec("ROLLBACK TO joined_write");
      db.exec("RELEASE joined_write");
    }
    throw error;
  }
}
