/**
 * Turns the PostgreSQL driver's errors into the store's backend-neutral ones
 * (src/store/errors.ts): a lost or refused connection, a server shutting
 * down, too many connections, a serialization failure or deadlock is
 * {@link StoreUnavailable} (503, retry); a unique violation is
 * {@link StoreConflict}; another integrity violation (foreign key, check) a
 * plain {@link StoreError}. Anything else is a bug and passes through.
 *
 * Messages never carry the driver's text (which may quote values) or the
 * connection URL: the driver's error stays as `cause`, for the log.
 *
 * @module
 */
import { StoreConflict, StoreError, StoreUnavailable } from "../errors.ts";
import { NO_PRIMARY } from "./primary_socket.ts";

/** Error codes of postgres.js and of Node's sockets that mean "cannot reach the server". */
const CONNECTION_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  NO_PRIMARY, // no server of a multi-host URL is a writable primary (a failover under way)
]);

/** SQLSTATEs after which a retry may succeed. */
const RETRYABLE_STATES = new Set([
  "40001", // serialization_failure
  "40P01", // deadlock_detected
  "55P03", // lock_not_available
  "57014", // query_canceled (statement timeout)
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
]);

/** Classes of SQLSTATE after which a retry may succeed: connection exception, insufficient resources. */
const RETRYABLE_CLASSES = new Set(["08", "53"]);

/** The text of a grant-ending write whose grant_epoch row is missing (db.ts endingClauses). */
export const UNANNOUNCED = "The grant_epoch row is missing";

/** The store error for a driver error, or `undefined` when it is not one we classify. */
export function classifyPostgresError(error: unknown): StoreError | undefined {
  if (error instanceof StoreError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") {
    // Deno's own socket errors carry no code.
    if (
      error instanceof Deno.errors.ConnectionRefused || error instanceof Deno.errors.ConnectionReset
    ) {
      return new StoreUnavailable("Database unreachable", { cause: error });
    }
    return undefined;
  }
  if (code === "23505") {
    return new StoreConflict("A unique value is already taken", { cause: error });
  }
  // Other integrity violations (foreign key, check, not null): a caller's bug, refused by the
  // schema. PostgreSQL's message names the constraint, never a value (those are in its detail).
  if (code.startsWith("23")) {
    const message = (error as { message?: unknown }).message;
    return new StoreError(
      `Constraint violated: ${typeof message === "string" ? message : code}`,
      { cause: error },
    );
  }
  if (CONNECTION_CODES.has(code) || RETRYABLE_CLASSES.has(code.slice(0, 2))) {
    return new StoreUnavailable("Database unreachable", { cause: error });
  }
  if (RETRYABLE_STATES.has(code)) {
    return new StoreUnavailable("Database busy: try again", { cause: error });
  }
  // A grant-ending commit's NOTIFY found the cluster's notification queue full (a listening
  // session somewhere sits in an open transaction): nothing committed, and it passes when that
  // session moves on. Other limits of class 54 are a statement's own and stay unclassified.
  // A grant-ending write's last statement refusing to commit it unannounced (db.ts
  // endingClauses: its text cast to an integer, quoted in the message).
  if (code === "22P02" && String((error as Error).message).includes(`"${UNANNOUNCED}"`)) {
    return new StoreError(UNANNOUNCED, { cause: error });
  }
  // The routine names it whatever the server's language; the message as a fallback.
  const { routine, message } = error as { routine?: unknown; message?: unknown };
  if (
    code === "54000" && (routine === "PreCommit_Notify" || /notification/i.test(String(message)))
  ) {
    return new StoreUnavailable("Database busy: the notification queue is full", { cause: error });
  }
  return undefined;
}

/**
 * Whether `error` (or its cause) says the connection itself is gone (closed, reset, destroyed),
 * as opposed to a statement the server refused on a live connection.
 */
export function isConnectionLost(error: unknown): boolean {
  const driver = error instanceof StoreError && error.cause !== undefined ? error.cause : error;
  if (
    driver instanceof Deno.errors.ConnectionReset || driver instanceof Deno.errors.BrokenPipe
  ) return true;
  const code = (driver as { code?: unknown } | null)?.code;
  return typeof code === "string" && CONNECTION_CODES.has(code) && code !== NO_PRIMARY;
}

/** Runs `fn`, rethrowing driver errors as store errors. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw classifyPostgresError(error) ?? error;
  }
}
