/**
 * Parsers of setting values: text → typed value, or a `SyntaxError` whose
 * message says what was expected. The caller names the source (flag or
 * environment variable) and the value.
 *
 * @module
 */
import { parseDuration } from "../platform/duration.ts";
import { isCidr } from "../platform/ip.ts";
import type { LogLevel } from "../platform/logger.ts";
import { checkDatabasePath, parseStoreUrl } from "../store/store_url.ts";

/** The words every boolean setting accepts, in flags and environment variables alike. */
export const BOOLEAN_WORDS = ["on", "off", "true", "false", "1", "0"] as const;

/**
 * Parses a boolean setting: on/true/1 or off/false/0, any letter case.
 *
 * @throws {SyntaxError} for anything else.
 */
export function parseBoolean(text: string): boolean {
  const word = text.trim().toLowerCase();
  if (word === "on" || word === "true" || word === "1") return true;
  if (word === "off" || word === "false" || word === "0") return false;
  throw new SyntaxError("expected on, off, true, false, 1 or 0");
}

/** Parses a TCP port, 0 meaning any free port. */
export function parsePort(text: string): number {
  const port = /^[0-9]{1,5}$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isInteger(port) || port > 65535) {
    throw new SyntaxError("expected a whole number from 0 to 65535");
  }
  return port;
}

/** Parses a duration such as `10h` into seconds. */
export function parseDurationSetting(text: string): number {
  try {
    return parseDuration(text.trim());
  } catch {
    throw new SyntaxError(
      'expected a positive whole number and a unit s, m, h or d, like "10h", at most 10000000d',
    );
  }
}

/** The shortest audit retention accepted: 30 days (docs/security.md, "The audit log"). */
export const MIN_AUDIT_RETENTION_SECONDS = 30 * 86_400;

/**
 * `--audit-retention`: `off` (0: keep every row) or a duration of at least
 * {@link MIN_AUDIT_RETENTION_SECONDS}, so that a slip such as `30m` for `30d` cannot empty the
 * log of everything older than half an hour.
 */
export function parseAuditRetention(text: string): number {
  if (text.trim() === "off") return 0;
  let seconds: number;
  try {
    seconds = parseDuration(text.trim());
  } catch {
    seconds = 0;
  }
  if (seconds < MIN_AUDIT_RETENTION_SECONDS) {
    throw new SyntaxError('expected off or a duration of 30d or more, like "365d"');
  }
  return seconds;
}

/** Parses an interval that may be off: `0` (or `off`) turns it off, else a duration in seconds. */
export function parseOptionalInterval(text: string): number {
  const word = text.trim().toLowerCase();
  if (word === "0" || word === "off") return 0;
  try {
    return parseDuration(word);
  } catch {
    throw new SyntaxError(
      'expected 0 (off) or a positive whole number and a unit s, m, h or d, like "1m"',
    );
  }
}

/**
 * The longest `--store-staleness`: 5 minutes. The bound is how long an
 * instance that hears nothing from PostgreSQL keeps accepting tokens that may
 * have been revoked; a bound of days would turn failing closed off.
 */
export const MAX_STORE_STALENESS_SECONDS = 300;

/** Parses `--store-staleness`: a duration from 1 s to {@link MAX_STORE_STALENESS_SECONDS}. */
export function parseStalenessSetting(text: string): number {
  const seconds = parseDurationSetting(text);
  if (seconds > MAX_STORE_STALENESS_SECONDS) {
    throw new SyntaxError(
      "expected 5m or less: longer, revoked tokens would keep working on an instance that " +
        "hears nothing from PostgreSQL",
    );
  }
  return seconds;
}

/**
 * A `--store` value, checked by the store's own parser and returned as
 * given; the parser's messages never contain the password.
 */
export function parseStoreSetting(text: string): string {
  parseStoreUrl(text.trim());
  return text.trim();
}

/** A `--db` value: a file path, never a URL (a URL goes in `--store`). */
export function parseDatabasePath(text: string): string {
  const path = parseText(text);
  checkDatabasePath(path);
  return path;
}

/** Non-empty text, trimmed. */
export function parseText(text: string): string {
  const value = text.trim();
  if (value === "") throw new SyntaxError("expected a value");
  return value;
}

/** Parses a comma-separated list of CORS origins, or `*`. */
export function parseOrigins(text: string): string[] {
  const origins = toList(text);
  for (const origin of origins) {
    if (origin !== "*" && !/^https?:\/\/[^/\s]+$/.test(origin)) {
      throw new SyntaxError(
        `entry "${origin}" is not "*" or an origin like "https://example.org"`,
      );
    }
  }
  if (origins.length === 0) throw new SyntaxError('expected "*" or a list of origins');
  return origins;
}

/** Parses a comma-separated list of CIDR ranges (possibly empty). */
export function parseCidrList(text: string): string[] {
  const ranges = toList(text);
  for (const range of ranges) {
    if (!isCidr(range)) {
      throw new SyntaxError(`entry "${range}" is not a CIDR range like "10.0.0.0/8"`);
    }
  }
  return ranges;
}

const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error", "off"];

/** Parses a log level. */
export function parseLogLevel(text: string): LogLevel {
  const level = text.trim().toLowerCase() as LogLevel;
  if (!LOG_LEVELS.includes(level)) throw new SyntaxError(`expected ${LOG_LEVELS.join(", ")}`);
  return level;
}

/** Parses an upstream base URL: http or https, without query, fragment or credentials. */
export function parseUpstreamUrl(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text.trim());
  } catch {
    url = undefined;
  }
  if (
    url === undefined || (url.protocol !== "http:" && url.protocol !== "https:") ||
    url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== ""
  ) {
    throw new SyntaxError("expected an http or https URL without query or credentials");
  }
  return text.trim();
}

function toList(text: string): string[] {
  return text.split(",").map((item) => item.trim()).filter(Boolean);
}

/** The values of `--forward-auth-header`. */
export const FORWARD_AUTH_HEADERS = ["x-original-uri", "x-forwarded-uri", "either"] as const;

/**
 * One of {@link FORWARD_AUTH_HEADERS}: the header a forward-auth request's original URI comes
 * from (the HTTP edge's `ForwardAuthHeader`, src/http/context.ts, says what each means).
 */
export type ForwardAuthHeader = typeof FORWARD_AUTH_HEADERS[number];

/**
 * Parses an https origin (`https://HOST[:PORT]`, no path, query or fragment), for `--issuer` and
 * `--portal-origin`; returns it without a trailing slash.
 */
export function parseHttpsOrigin(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new SyntaxError("expected an origin such as https://keys.example.org");
  }
  if (url.protocol !== "https:" || url.origin !== text.replace(/\/$/, "")) {
    throw new SyntaxError(
      "expected an https:// origin without path, such as https://keys.example.org",
    );
  }
  return url.origin;
}

/** Parses which header names forward-auth's original request, in any letter case. */
export function parseForwardAuthHeader(text: string): ForwardAuthHeader {
  const header = text.trim().toLowerCase() as ForwardAuthHeader;
  if (!(FORWARD_AUTH_HEADERS as readonly string[]).includes(header)) {
    throw new SyntaxError("expected x-original-uri, x-forwarded-uri or either");
  }
  return header;
}

/** Most request workers: beyond this, more threads only cost memory. */
export const MAX_WORKERS = 64;

/** `--workers`: a whole number from 1 to {@link MAX_WORKERS}, or `auto` (the CPU count). */
export function parseWorkers(text: string): number {
  if (text.trim().toLowerCase() === "auto") {
    return Math.min(MAX_WORKERS, Math.max(1, navigator.hardwareConcurrency));
  }
  const n = /^\d{1,3}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!(n >= 1 && n <= MAX_WORKERS)) {
    throw new SyntaxError(`expected a whole number from 1 to ${MAX_WORKERS}, or "auto"`);
  }
  return n;
}

/** The longest `--login-queue-wait`: a login held longer than a minute would meet client timeouts. */
export const MAX_LOGIN_QUEUE_WAIT_SECONDS = 60;

/** `--login-queue-wait`: a duration from 1 s to {@link MAX_LOGIN_QUEUE_WAIT_SECONDS}. */
export function parseLoginQueueWait(text: string): number {
  let seconds: number;
  try {
    seconds = parseDuration(text.trim());
  } catch {
    seconds = NaN;
  }
  if (!(seconds >= 1 && seconds <= MAX_LOGIN_QUEUE_WAIT_SECONDS)) {
    throw new SyntaxError(
      `expected a duration from 1s to ${MAX_LOGIN_QUEUE_WAIT_SECONDS}s, like "5s"`,
    );
  }
  return seconds;
}

/** Most entries `--grant-cache-size` accepts (each costs a few hundred bytes). */
export const MAX_GRANT_CACHE_SIZE = 10_000_000;

/** `--grant-cache-size`: a whole number from 0 (no cache) to {@link MAX_GRANT_CACHE_SIZE}. */
export function parseCacheSize(text: string): number {
  const n = /^\d{1,8}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!(n >= 0 && n <= MAX_GRANT_CACHE_SIZE)) {
    throw new SyntaxError(
      `expected a whole number from 0 (no cache) to ${MAX_GRANT_CACHE_SIZE}`,
    );
  }
  return n;
}
