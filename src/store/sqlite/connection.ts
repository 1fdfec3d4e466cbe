/**
 * One SQLite connection and the mechanics every table group shares:
 * pragmas and migrations, prepared statements that count grant-ending
 * writes, writes with their audit rows (their transactions in transactions.ts),
 * the busy retry, error classification, durability, and the grant change feed.
 *
 * Nothing in here awaits inside a transaction: a write's function runs
 * synchronously from `BEGIN IMMEDIATE` to `COMMIT`, so a transaction can
 * never span an `await`.
 *
 * @module
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { AuditOf, GrantEpoch, GrantInvalidations, GrantScope } from "../store.ts";
import { defineAuditRedact } from "./audit_anonymize.ts";
import { runWithoutBusyWait, writeWhenUnlocked } from "./busy_retry.ts";
import { toStoreError } from "./errors.ts";
import { migrate } from "./migrate.ts";
import { MIGRATIONS } from "./migrations.ts";
import { createChangeFeed } from "./change_feed.ts";
import { type CommitCounter, openCommitCounter } from "./wal_index.ts";
import { createWriteFailures } from "./write_failures.ts";
import { createAuditAppender } from "./audit_append.ts";
import { isWriteStatement, toCountedStatement } from "./counted_statement.ts";
import { createTransactions, type GrantCounts } from "./transactions.ts";
import {
  openWalSyncGroup,
  refuseAfterSyncFailure,
  type WalSyncGroup,
  type WalSyncRunner,
} from "./wal_sync.ts";

/** Bytes of the database file that reads go through a memory map for. */
export const MMAP_BYTES = 256 * 1024 * 1024;

/** Rows of the grant change record kept (`changeRecordRows`' default). */
export const CHANGE_RECORD_ROWS = 100_000;

/** How long a write waits for another connection's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 2000;

/** Options for opening a SQLite store. */
export interface SqliteStoreOptions {
  /** How long a write waits for another connection's lock. Default {@link BUSY_TIMEOUT_MS}. */
  busyTimeoutMs?: number;
  /**
   * Caps the database at this many pages (`PRAGMA max_page_count`), after
   * which writes fail as on a full disk. Default: SQLite's own limit.
   */
  maxPageCount?: number;
  /**
   * `"full"` (the default): every commit is synced to disk before it
   * returns (`PRAGMA synchronous = FULL`). `"grants"`, for the server: only
   * writes that can end a grant (revocations, key and user changes) wait
   * for a sync of the write-ahead log before they resolve; others (a new
   * token and its audit row, a key's last use, throttle counters) reach the
   * disk with the next sync or checkpoint, so a power cut (not a crash of
   * keygate) can lose the last of them. The sync runs off the event loop and
   * is shared by the commits made while one runs (wal_sync.ts), so neither a
   * login nor a revocation blocks the thread that serves secure requests.
   */
  durability?: "full" | "grants";
  /**
   * Runs each WAL sync of durability `"grants"` (see {@link WalSyncRunner}); for tests, which
   * hold a sync open to see who waits for it. Default: runs the sync.
   */
  runWalSync?: WalSyncRunner;
  /**
   * Hears, once, that a WAL sync of durability `"grants"` failed (the disk's message): every
   * later write fails until the process restarts, so the server stops (src/server/fatal_stop.ts).
   */
  onWalSyncFailure?(reason: string): void;
  /** Hears the one-line warnings of the migrations this opening applies (never addresses). */
  onMigrationWarning?(line: string): void;
  /**
   * Rows of the grant change record kept (default {@link CHANGE_RECORD_ROWS}): a store that
   * has not read the record since more changes than this were made drops its caches.
   */
  changeRecordRows?: number;
}

/** A row as `node:sqlite` returns it. */
export type Row = Record<string, SQLInputValue>;

/** What the store uses of a prepared statement. */
export type Statement = Pick<StatementSync, "run" | "get" | "all">;

/** How a write statement may touch token grants (see `Connection.sql`). */
export type StatementEffect = "keeps-grants" | "trims-grants";

/** An open connection and its shared mechanics. */
export interface Connection {
  readonly db: DatabaseSync;
  readonly path: string;
  readonly busyTimeoutMs: number;
  /**
   * Prepares a statement. A write (what SQLite says writes: a `WITH … SELECT`
   * is a read, see `isWriteStatement`) counts as a grant write whenever it
   * changes a row, unless it is declared `"keeps-grants"`: it cannot end or
   * change any live token grant. Writes are counted by default, so a new
   * one cannot be forgotten. A write that runs a counted statement waits for a
   * WAL sync even when it changed nothing (see `write`), unless the statement is
   * declared `"trims-grants"`: it ends grants only as a side effect of another
   * write (a login's cap on live tokens), so running it unchanged answers
   * nothing about a grant. Store writes run inside `write()`; one that runs in
   * autocommit is neither synced nor fed to the change feed's pruning.
   */
  sql(text: string, effect?: StatementEffect): Statement;
  /** Runs a read; SQLite's errors become store errors. */
  read<T>(fn: () => T): Promise<T>;
  /**
   * Runs `fn` and appends `audit` in one `BEGIN IMMEDIATE` transaction,
   * waiting for another connection's lock between turns of the event loop;
   * SQLite's errors become store errors.
   */
  write<T>(fn: () => T, audit?: AuditOf<T>): Promise<T>;
  /** Runs `fn` with SQLite's busy wait off (see busy_retry.ts). */
  withoutBusyWait<T>(fn: () => T): T;
  /**
   * Runs `fn` (which calls the store) in one transaction: every write meanwhile joins it instead
   * of committing on its own (in a savepoint: a write that fails leaves nothing), and it commits when `fn` resolves (pruning the change feed and
   * waiting for a WAL sync as one write would, if any joined write ran a grant write) or rolls
   * back when it rejects. For bulk loads by a single caller (bench seeding, tests): any other
   * write on this connection meanwhile joins the bulk too, and is lost if it rolls back.
   */
  runBulk<T>(fn: () => Promise<T>): Promise<T>;
  /** See `Store.readGrantEpoch`. */
  readGrantEpoch(): GrantEpoch;
  /** See `Store.readGrantChanges`. */
  readGrantChanges(since: GrantEpoch): readonly GrantScope[] | undefined;
  /** See `Store.readGrantInvalidations`. */
  readGrantInvalidations(): GrantInvalidations;
  /** Writes through this connection that may have ended or changed a grant. */
  readGrantWrites(): number;
  /**
   * WAL syncs made after grant-ending commits, with durability `"grants"`: fewer than the
   * grant writes when they come concurrently (commits share a sync).
   */
  readWalSyncs(): number;
  /** `PRAGMA data_version` reads by the grant change feed (the WAL index spares the rest). */
  readDataVersionReads(): number;
  /**
   * See `Store.findWriteFailure`. A failed WAL sync (durability `"grants"`) is answered until
   * the process restarts: no probe write clears it.
   */
  findWriteFailure(): string | undefined;
  close(): void;
}

/**
 * Opens (creating if needed) the database at `path`, applies pragmas and
 * pending migrations.
 */
export function openConnection(path: string, options: SqliteStoreOptions = {}): Connection {
  const busyTimeoutMs = options.busyTimeoutMs ?? BUSY_TIMEOUT_MS;
  if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new RangeError(`Invalid busyTimeoutMs "${busyTimeoutMs}": expected a whole number`);
  }
  const db = new DatabaseSync(path, { timeout: busyTimeoutMs });
  try {
    db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    if (path !== ":memory:") db.exec("PRAGMA journal_mode = WAL");
    const durability = options.durability ?? "full";
    db.exec(
      `PRAGMA synchronous = ${durability === "full" || path === ":memory:" ? "FULL" : "NORMAL"}`,
    );
    db.exec("PRAGMA foreign_keys = ON");
    // Read pages through a memory map: token lookups in a large table cost no read()
    // system call, and the pages live in the OS page cache rather than our heap.
    db.exec(`PRAGMA mmap_size = ${MMAP_BYTES}`);
    // The append-only trigger's exception asks this connection for it (audit_anonymize.ts).
    defineAuditRedact(db);
    for (const line of migrate(db, MIGRATIONS)) options.onMigrationWarning?.(line);
    if (options.maxPageCount !== undefined) {
      if (!Number.isSafeInteger(options.maxPageCount) || options.maxPageCount < 1) {
        throw new RangeError(`Invalid maxPageCount "${options.maxPageCount}"`);
      }
      db.exec(`PRAGMA max_page_count = ${options.maxPageCount}`);
    }
    // WAL mode: the commit frames are in the -wal file, and syncing it makes them durable.
    // SQLite keeps -wal and -shm beside the file a symbolic link points to.
    const syncWal = durability === "grants" && path !== ":memory:"
      ? openWalSyncGroup(Deno.realPathSync(path), {
        runSync: options.runWalSync,
        onFailure: options.onWalSyncFailure,
      })
      : undefined;
    const recordRows = options.changeRecordRows ?? CHANGE_RECORD_ROWS;
    if (!Number.isSafeInteger(recordRows) || recordRows < 1) {
      throw new RangeError(`Invalid changeRecordRows "${recordRows}": expected a whole number`);
    }
    return createConnection(db, path, {
      busyTimeoutMs,
      commits: openCommitCounter(path),
      syncWal,
      recordRows,
    });
  } catch (error) {
    db.close();
    throw error;
  }
}

function createConnection(
  db: DatabaseSync,
  path: string,
  options: {
    busyTimeoutMs: number;
    commits: CommitCounter;
    syncWal: WalSyncGroup | undefined;
    recordRows: number;
  },
): Connection {
  const { busyTimeoutMs, commits, syncWal, recordRows } = options;
  /**
   * Grant-ending statements that changed a row (they evict caches and move the change feed), and
   * those run whether or not they did: a write that ran one waits for a sync even when it changed
   * nothing (a retried revocation finds the token revoked by a commit whose sync may still be
   * running), and that is all the second count is for.
   */
  const grants: GrantCounts = { writes: 0, runs: 0 };
  const feed = createChangeFeed(db, {
    commits,
    recordRows,
    readGrantWrites: () => grants.writes,
  });

  function sql(text: string, effect?: StatementEffect): Statement {
    const statement = db.prepare(text);
    // A write may end a grant, unless declared otherwise; a read (a `WITH … SELECT` too) never.
    if (effect === "keeps-grants" || !isWriteStatement(db, text)) return statement;
    return toCountedStatement(statement, {
      ran: effect === "trims-grants" ? noop : () => grants.runs++,
      changed: () => grants.writes++,
    });
  }

  const appendEntries = createAuditAppender(sql);
  const writeFailures = createWriteFailures(sql);
  const { commit, probeTransaction, runBulk } = createTransactions({
    db,
    grants,
    pruneChanges: feed.pruneChanges,
    syncWal,
  });

  const withoutBusyWait = <T>(fn: () => T): T => runWithoutBusyWait(db, busyTimeoutMs, fn);

  const connection: Connection = {
    db,
    path,
    busyTimeoutMs,
    sql,
    withoutBusyWait,
    read: readNow,
    async write(fn, audit) {
      try {
        refuseAfterSyncFailure(syncWal);
        const { result, endedGrants, ranGrants } = await writeWhenUnlocked(
          connection,
          () =>
            commit(() => {
              const result = fn();
              appendEntries(typeof audit === "function" ? audit(result) : audit);
              return result;
            }),
        );
        writeFailures.clear();
        // The durable point: a sync that started after this commit (shared with others). A
        // write that ran a grant-ending statement waits even if it changed nothing: what it
        // found (a token revoked already) may be another write's commit, not yet synced; a
        // sync of the shared -wal file from any connection covers that commit too.
        // A "trims-grants" statement waits only when it changed a row (endedGrants).
        if (syncWal !== undefined && (ranGrants || endedGrants)) await syncWal.afterCommit();
        return result;
      } catch (error) {
        writeFailures.note(error);
        throw toStoreError(error);
      }
    },
    readGrantEpoch: feed.readGrantEpoch,
    readGrantChanges: feed.readGrantChanges,
    readGrantInvalidations: feed.readGrantInvalidations,
    readGrantWrites: () => grants.writes,
    readWalSyncs: () => syncWal?.readSyncs() ?? 0,
    readDataVersionReads: feed.readDataVersionReads,
    runBulk,
    findWriteFailure: () =>
      syncWal?.findSyncFailure() ??
        writeFailures.find((probe) => withoutBusyWait(() => probeTransaction(probe))),
    close() {
      if (db.isOpen) db.close();
      commits.close(); // after the connection: see wal_index.ts
      syncWal?.close();
    },
  };

  return connection;
}

/** A read: runs at once (node:sqlite is synchronous); SQLite's errors become store errors. */
// deno-lint-ignore require-await
async function readNow<T>(fn: () => T): Promise<T> {
  try {
    return fn();
  } catch (error) {
    throw toStoreError(error);
  }
}

function noop(): void {}
