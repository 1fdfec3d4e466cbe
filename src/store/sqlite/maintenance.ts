/**
 * SQLite-only operations that are no part of the store contract: online
 * backup, integrity checks, WAL checkpoints, file inspection, and counters
 * for tests and diagnostics. The admin CLI and `main.ts` reach them through
 * `findSqliteMaintenance()` (src/store/open_store.ts).
 *
 * @module
 */
import { backup, DatabaseSync } from "node:sqlite";
import type { Connection, Row } from "./connection.ts";

/** Pages copied per step of a backup; between steps other connections may write. */
export const BACKUP_PAGES_PER_STEP = 1000;

/** SQLite-only operations on an open store. */
export interface SqliteMaintenance {
  /** The database file's path (`:memory:` for an in-memory database). */
  readonly path: string;
  /**
   * Writes a consistent copy of the database to a new file with SQLite's
   * online backup API, a few pages at a time. `VACUUM INTO` would compact,
   * but Deno allows it only with every permission, since it attaches a database.
   */
  backupDatabaseTo(path: string): Promise<void>;
  /** Problems found by `PRAGMA integrity_check` and `foreign_key_check`; empty when sound. */
  checkDatabaseIntegrity(): string[];
  /** Moves the write-ahead log into the database and truncates it; for shutdown. */
  checkpointWal(): void;
  /**
   * Runs `fn` (which calls the store) in one transaction, committed when it
   * resolves and rolled back when it rejects: for bulk loads by a single
   * caller (bench seeding, tests), where one commit per row would take
   * minutes. Nothing else may use the store until it settles: every store
   * call meanwhile joins the transaction.
   */
  runBulkTransaction<T>(fn: () => Promise<T>): Promise<T>;
  /** Rows changed by this connection since it opened (SQLite `total_changes()`), for tests. */
  countChanges(): number;
  /** Writes through this connection that may have ended a grant (tests, diagnostics). */
  readGrantWrites(): number;
  /** WAL syncs made after grant-ending commits, with durability `"grants"` (tests, diagnostics). */
  readWalSyncs(): number;
  /** `PRAGMA data_version` reads by the grant change feed: it asks SQLite only after a commit. */
  readDataVersionReads(): number;
}

export function createSqliteMaintenance(conn: Connection): SqliteMaintenance {
  const { db, sql } = conn;
  const totalChanges = sql("SELECT total_changes() AS n");
  const integrityCheck = sql("PRAGMA integrity_check");
  const foreignKeyCheck = sql("PRAGMA foreign_key_check");
  return {
    path: conn.path,
    async backupDatabaseTo(path) {
      await backup(db, path, { rate: BACKUP_PAGES_PER_STEP });
    },
    checkDatabaseIntegrity() {
      const problems = (integrityCheck.all() as { integrity_check: string }[])
        .map((row) => row.integrity_check)
        .filter((text) => text !== "ok");
      for (const row of foreignKeyCheck.all() as Row[]) {
        problems.push(`foreign key violation: ${row.table} row ${row.rowid} -> ${row.parent}`);
      }
      return problems;
    },
    checkpointWal() {
      db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    },
    runBulkTransaction: conn.runBulk,
    countChanges: () => (totalChanges.get() as { n: number }).n,
    readGrantWrites: conn.readGrantWrites,
    readWalSyncs: conn.readWalSyncs,
    readDataVersionReads: conn.readDataVersionReads,
  };
}

/**
 * Opens the database file at `path` read-only and returns the problems
 * `PRAGMA integrity_check` finds (empty when sound) and its row counts; for
 * validating a backup without touching it.
 */
export function inspectDatabaseFile(
  path: string,
): { problems: string[]; userVersion: number; counts: Record<string, number> } {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const problems = (db.prepare("PRAGMA integrity_check").all() as { integrity_check: string }[])
      .map((row) => row.integrity_check)
      .filter((text) => text !== "ok");
    const { user_version } = db.prepare("PRAGMA user_version").get() as { user_version: number };
    const counts: Record<string, number> = {};
    for (const table of ["users", "api_keys", "tokens"]) {
      counts[table] = (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    }
    return { problems, userVersion: user_version, counts };
  } finally {
    db.close();
  }
}

/**
 * Copies the database file at `from` (a backup) over the database at `to`
 * through SQLite's backup API, so a live file's write-ahead log stays
 * consistent; for `admin db restore`, with the server stopped.
 */
export async function restoreDatabaseFile(from: string, to: string): Promise<void> {
  const source = new DatabaseSync(from, { readOnly: true });
  try {
    await backup(source, to, { rate: BACKUP_PAGES_PER_STEP });
  } finally {
    source.close();
  }
}
