/**
 * The one error type keygate throws for anything a caller did wrong, and the
 * one function that turns errors into responses.
 *
 * @module
 */
import { type Format, toResponse } from "./respond.ts";

/** Options for {@link HttpError}. */
export interface HttpErrorOptions {
  /** Extra response headers, such as `Allow`, `Retry-After` or `WWW-Authenticate`. */
  headers?: HeadersInit;
  cause?: unknown;
}

/**
 * An error with an HTTP status and a stable machine-readable `code`.
 *
 * Messages of 4xx errors are shown to callers, so they never hold secrets.
 */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  readonly headers: Headers;

  constructor(status: number, code: string, message: string, options: HttpErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "HttpError";
    this.status = status;
    this.code = code;
    this.headers = new Headers(options.headers);
  }
}

/** SQLite result codes (primary, low byte) that mean "try again later", not "bug". */
const UNAVAILABLE_SQLITE_CODES = new Set([
  5, // SQLITE_BUSY
  6, // SQLITE_LOCKED
  10, // SQLITE_IOERR
  13, // SQLITE_FULL
]);

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
]);

/** Whether `error` is a database error that a retry may cure (locked, busy, disk full). */
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

/** Seconds a caller should wait after a 503 from a locked or full database. */
export const DATABASE_RETRY_AFTER_SECONDS = 1;

/**
 * Maps any thrown value to an {@link HttpError}: an `HttpError` as it is,
 * database contention or a full disk to 503, everything else to a generic 500.
 */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (isDatabaseUnavailable(error)) {
    return new HttpError(503, "service_unavailable", "The database is busy: try again shortly", {
      headers: { "retry-after": String(DATABASE_RETRY_AFTER_SECONDS) },
      cause: error,
    });
  }
  return new HttpError(500, "internal_error", "Internal server error", { cause: error });
}

/**
 * Renders an error as GlobalGiving's `error_response` document.
 *
 * `error` is always an array, `status` is a string, in JSON and XML alike.
 */
export function toErrorResponse(error: HttpError, format: Format): Response {
  return toResponse(format, "error_response", {
    status: String(error.status),
    errors: { error: [{ error_code: error.code, error_message: error.message }] },
  }, { status: error.status, headers: error.headers });
}
