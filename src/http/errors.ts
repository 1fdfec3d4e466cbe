/**
 * The one error type keygate throws for anything a caller did wrong, and the
 * one function that turns errors into responses.
 *
 * @module
 */
import { AuthError, type AuthErrorCode } from "../auth/errors.ts";
import { STORE_RETRY_AFTER_SECONDS, StoreUnavailable } from "../store/errors.ts";
import type { Format } from "../formats/format.ts";
import { toResponse } from "./respond.ts";

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

/** The HTTP status of each domain error code: the one table. */
export const AUTH_ERROR_STATUS: Readonly<Record<AuthErrorCode, number>> = {
  invalid_request: 400,
  invalid_credentials: 401,
  invalid_api_key: 401,
  invalid_token: 401,
  token_expired: 401,
  too_many_attempts: 429,
  forbidden: 403,
  request_aborted: 400,
  service_busy: 503,
  not_found: 404,
  conflict: 409,
  rate_limited: 429,
  quota_exceeded: 429,
};

/** Codes whose 401 names the Bearer scheme (RFC 6750 section 3). */
const BEARER_CHALLENGE_CODES: ReadonlySet<AuthErrorCode> = new Set([
  "invalid_token",
  "token_expired",
]);

/** The response headers a domain error brings: a Bearer challenge, `Retry-After`. */
function toAuthErrorHeaders(error: AuthError): Headers {
  const headers = new Headers();
  if (BEARER_CHALLENGE_CODES.has(error.code)) {
    headers.set("www-authenticate", `Bearer realm="keygate", error="${error.code}"`);
  }
  if (error.retryAfterSeconds !== undefined) {
    headers.set("retry-after", String(error.retryAfterSeconds));
  }
  return headers;
}

/**
 * Maps any thrown value to an {@link HttpError}: an `HttpError` as it is, a
 * domain error by its code ({@link AUTH_ERROR_STATUS}), an unavailable store
 * to 503 with `Retry-After`, everything else to a generic 500.
 */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof AuthError) {
    return new HttpError(AUTH_ERROR_STATUS[error.code], error.code, error.message, {
      headers: toAuthErrorHeaders(error),
      // Which check failed goes to the server's log only (see app.ts), never to the caller.
      cause: error.detail ?? error,
    });
  }
  if (error instanceof StoreUnavailable) {
    return new HttpError(503, "service_unavailable", "The database is busy: try again shortly", {
      headers: { "retry-after": String(STORE_RETRY_AFTER_SECONDS) },
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
