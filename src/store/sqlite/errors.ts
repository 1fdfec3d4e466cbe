/**
 * SQLite's errors, classified into the backend-neutral store errors
 * (src/store/errors.ts): nothing outside src/store/sqlite/ knows SQLite's
 * error numbers.
 *
 * @module
 */
import { StoreConflict, StoreError, StoreUnavailable } from "../errors.ts";

/** SQLite result codes (primary, low byte) that mean "try again later", not "bug". */
const UNAVAILABLE_SQLITE_CODES = new Set([
  5, // SQLITE_BUSY
  6, // SQLITE_LOCKED
  8, // SQLITE_READONLY (a read-only file system or file)
  10, // SQLITE_IOERR
  13, // SQLITE_FULL
]);

/** SQLITE_CONSTRAINT: a UNIQUE (or other) constraint refused the write. */
const CONSTRAINT_SQLITE_CODE = 19;

/**
 * SQLite's own texts for those codes. Deno's `node:sqlite` sets `errcode` on
 * errors from prepared statements but not on those from `db.exec()` (such as
 * `BEGIN IMMEDIATE`), which carry only `code: "ERR_SQLITE_ERROR"` and the text.
 */
const UNAVAILABLE_SQLITE_MESSAGES = new Set([
  "database is locked",
  "database table is locked",
  "disk I/O error",
  "database or disk is full",
  "attempt to write a readonly database",
]);

/** Whether `error` is a database error that a retry may cure (locked, busy, disk full, read-only). */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { errcode, code } = error as { errcode?: unknown; code?: unknown };
  if (typeof errcode === "number") return UNAVAILABLE_SQLITE_CODES.has(errcode & 0xff);
  return code === "ERR_SQLITE_ERROR" && UNAVAILABLE_SQLITE_MESSAGES.has(error.message);
}

/** Whether `error` is SQLITE_BUSY: another connection holds the lock, so a retry may succeed. */
export function isDatabaseBusy(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { errcode, code } = error as { errcode?: unknown; code?: unknown };
  if (typeof errcode === "number") return (errcode & 0xff) === 5;
  return code === "ERR_SQLITE_ERROR" && error.message === "database is locked";
}

/**
 * Whether `error` came from SQLite: its own errors (`ERR_SQLITE_ERROR`, or an
 * `errcode`) or use of a closed database.
 */
function isSqliteError(error: unknown): error is Error {
  if (!(error instanceof Error)) return false;
  const { code, errcode } = error as { code?: unknown; errcode?: unknown };
  return typeof errcode === "number" || code === "ERR_SQLITE_ERROR" ||
    (code === "ERR_INVALID_STATE" && /finalized|not open/.test(error.message));
}

/**
 * Turns a SQLite error into a store error: {@link StoreUnavailable} for
 * busy, locked, I/O and full; {@link StoreConflict} for a constraint;
 * {@link StoreError} for any other SQLite error. Anything else (a bug in
 * keygate, an error thrown by an audit function) is returned as it is.
 */
export function toStoreError(error: unknown): unknown {
  if (error instanceof StoreError || !isSqliteError(error)) return error;
  if (isDatabaseUnavailable(error)) {
    return new StoreUnavailable(`The database is unavailable: ${error.message}`, {
      cause: error,
    });
  }
  const { errcode } = error as { errcode?: unknown };
  if (typeof errcode === "number" && (errcode & 0xff) === CONSTRAINT_SQLITE_CODE) {
    return new StoreConflict(`The write conflicts with a stored row: ${error.message}`, {
      cause: error,
    });
  }
  return new StoreError(`Database error: ${error.message}`, { cause: error });
}
