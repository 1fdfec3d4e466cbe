/**
 * Backend-neutral store errors. Each backend classifies its driver's errors
 * into these (SQLite's busy, locked, I/O and full codes; a network
 * database's lost connection or failover), so that nothing above the store
 * knows a database's error numbers. The HTTP edge maps
 * {@link StoreUnavailable} to 503 with `Retry-After`; anything else from the
 * store is a bug (500).
 *
 * @module
 */

/** Seconds a caller should wait after a 503 from an unavailable store. */
export const STORE_RETRY_AFTER_SECONDS = 1;

/** Options of store errors. */
export interface StoreErrorOptions {
  /** The driver's error, kept for logs (never shown to callers). */
  cause?: unknown;
}

/** Base class of the store's errors. */
export class StoreError extends Error {
  constructor(message: string, options: StoreErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "StoreError";
  }
}

/**
 * The database cannot serve this now, and a retry may succeed: locked or
 * busy past the wait, disk full, I/O error, unreachable, or (for the grant
 * change feed) not confirmed fresh.
 */
export class StoreUnavailable extends StoreError {
  constructor(message: string, options: StoreErrorOptions = {}) {
    super(message, options);
    this.name = "StoreUnavailable";
  }
}

/**
 * The write contradicts what is stored: a unique value taken, or a row
 * changed meanwhile by someone else (a key rotated or revoked during a
 * rotation). Nothing was written.
 */
export class StoreConflict extends StoreError {
  constructor(message: string, options: StoreErrorOptions = {}) {
    super(message, options);
    this.name = "StoreConflict";
  }
}

/**
 * A login's token was not stored: a login-failure counter it was told to respect
 * (`Store.insertToken`'s `unlessBlocked`) blocks logins until `blockedUntil`. Nothing was written.
 */
export class StoreBlocked extends StoreError {
  readonly blockedUntil: number;

  constructor(blockedUntil: number) {
    super("A login-failure counter blocks this login");
    this.name = "StoreBlocked";
    this.blockedUntil = blockedUntil;
  }
}

/** Whether `error` says the store is unavailable for now (a retry may succeed). */
export function isStoreUnavailable(error: unknown): error is StoreUnavailable {
  return error instanceof StoreUnavailable;
}
