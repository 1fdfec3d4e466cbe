/**
 * The domain's one error type. Domain code (the gate, the throttle, logins,
 * revocation, keys, users, the password pool) throws an {@link AuthError}
 * with a code from a closed union; the HTTP edge maps each code to a status
 * in one table (src/http/errors.ts), and the admin CLI prints the message.
 *
 * @module
 */

/** Every code the domain throws; stable machine words clients can switch on. */
export const AUTH_ERROR_CODES = [
  /** Input the domain refuses: an e-mail, password, label or time out of bounds. */
  "invalid_request",
  /** A login failed: unknown e-mail, wrong password, unusable or foreign key, disabled user. */
  "invalid_credentials",
  /** A request needing an API key came without a usable one. */
  "invalid_api_key",
  /** A secure request's token is missing, unknown, revoked or not of this key. */
  "invalid_token",
  /** A secure request's token has expired. */
  "token_expired",
  /** Too many failed logins: blocked for `retryAfterSeconds`. */
  "too_many_attempts",
  /** The caller is known but may not do this (introspection without a resource-server key). */
  "forbidden",
  /** The client went away before its login was checked. */
  "request_aborted",
  /** The password pool is full: retry after `retryAfterSeconds`. */
  "service_busy",
  /** The user or key named does not exist. */
  "not_found",
  /** The change contradicts the stored state (an e-mail taken, a key rotated meanwhile). */
  "conflict",
  /** A rate limit of the API key or its user is spent: retry after `retryAfterSeconds`. */
  "rate_limited",
  /** A quota of the API key or its user is spent until it refills (or for good). */
  "quota_exceeded",
] as const;

/** The closed union of {@link AUTH_ERROR_CODES}. */
export type AuthErrorCode = typeof AUTH_ERROR_CODES[number];

/** Options for {@link AuthError}. */
export interface AuthErrorOptions {
  /** When a retry may succeed (too_many_attempts, service_busy), in seconds. */
  retryAfterSeconds?: number;
  /**
   * Which check failed, for the audit log and server logs only (such as
   * `wrong_password`); never shown to the caller.
   */
  detail?: string;
  cause?: unknown;
}

/**
 * An error of the domain: a stable `code` and a message that may be shown
 * to the caller (it never holds a secret).
 */
export class AuthError extends Error {
  readonly code: AuthErrorCode;
  readonly retryAfterSeconds?: number;
  readonly detail?: string;

  constructor(code: AuthErrorCode, message: string, options: AuthErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "AuthError";
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.detail = options.detail;
  }
}
