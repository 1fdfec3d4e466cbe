/**
 * The admin CLI's argument values: e-mails, passwords, durations, times, and
 * references to users and API keys (numeric id, unambiguous prefix or whole
 * key), each failing with one line that says what was expected.
 *
 * @module
 */
import { hashSecret, normalizeApiKey, toCanonicalEmail } from "../credentials.ts";
import { parseDuration } from "../duration.ts";
import type { ApiKey, Store, User } from "../store.ts";
import { MAX_EMAIL_LENGTH, MAX_PASSWORD_BYTES } from "../token_router.ts";
import { AdminError } from "./io.ts";

// deno-lint-ignore no-control-regex
const INVALID_EMAIL_CHARACTER = /[\s\x00-\x1f\x7f]/;

/** A new user's e-mail, in NFC and lower case (see docs/security.md, "Request bodies"). */
export function toEmail(text: string): string {
  const email = toCanonicalEmail(text);
  if (
    email.length < 3 || email.length > MAX_EMAIL_LENGTH || !email.includes("@") ||
    INVALID_EMAIL_CHARACTER.test(email)
  ) {
    throw new AdminError(
      `Invalid e-mail "${clip(text)}": expected an address of 3 to ${MAX_EMAIL_LENGTH} characters`,
      2,
    );
  }
  return email;
}

/** A password read from standard input. */
export function toPassword(password: string): string {
  const bytes = new TextEncoder().encode(password).byteLength;
  if (bytes === 0 || bytes > MAX_PASSWORD_BYTES) {
    throw new AdminError(
      `Invalid password: expected 1 to ${MAX_PASSWORD_BYTES} bytes on standard input`,
    );
  }
  return password;
}

/** A DURATION argument or option, in seconds. */
export function toDuration(text: string, what: string): number {
  try {
    return parseDuration(text);
  } catch {
    throw new AdminError(
      `Invalid ${what} "${clip(text)}": expected a whole number and a unit, like 90s, 15m, 10h, 7d`,
      2,
    );
  }
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?)?(Z|[+-]\d{2}:?\d{2})?$/;

/**
 * A TIME: an ISO 8601 time (without a zone it is UTC), milliseconds since the
 * epoch, or a duration meaning that long before `now`.
 */
export function toTime(text: string, now: number, what: string): number {
  if (/^[0-9]{1,15}$/.test(text)) return Number(text);
  if (ISO_TIME.test(text)) {
    const zoned = /(Z|[+-]\d{2}:?\d{2})$/.test(text) || text.length === 10 ? text : `${text}Z`;
    const time = Date.parse(zoned.replace(" ", "T"));
    if (Number.isFinite(time)) return time;
  }
  try {
    return now - parseDuration(text) * 1000;
  } catch {
    throw new AdminError(
      `Invalid ${what} "${clip(text)}": expected an ISO 8601 time, ` +
        'milliseconds since the epoch or a duration like "24h"',
      2,
    );
  }
}

/** The user with this e-mail (any letter case, any Unicode normal form). */
export function findUser(store: Store, email: string): User {
  const user = store.findUserByEmail(toCanonicalEmail(email));
  if (user === undefined) {
    throw new AdminError(`No user "${clip(email)}"`);
  }
  return user;
}

/** A key found by a reference, and how the reference matched. */
export interface KeyMatch {
  key: ApiKey;
  /** Says which key was meant: `API key 3 (by id)`, `API key 3 (prefix 1a2b3c4d)`. */
  description: string;
}

const MIN_PREFIX = 4;

/**
 * Finds an API key by its numeric id (as `key list` shows it), by an
 * unambiguous prefix of the key (at least four characters, the `…` of the
 * listing allowed), or by the whole key.
 */
export function findKey(store: Store, reference: string): KeyMatch {
  const text = reference.trim().replace(/…$/, "");
  const whole = normalizeApiKey(text);
  if (whole !== undefined) {
    const key = store.findApiKeyByHash(hashSecret(whole));
    if (key === undefined) throw new AdminError("No such API key (the whole key was given)");
    return { key, description: `API key ${key.id}` };
  }
  const byId = /^[1-9][0-9]{0,15}$/.test(text) ? store.findApiKeyById(Number(text)) : undefined;
  const prefix = text.toLowerCase();
  const byPrefix = prefix.length >= MIN_PREFIX && /^[0-9a-f-]+$/.test(prefix)
    ? store.listApiKeys().filter((key) => prefixMatches(key.prefix, prefix))
    : [];
  const candidates = [...new Set([...(byId ? [byId.id] : []), ...byPrefix.map((k) => k.id)])];
  if (candidates.length > 1) {
    throw new AdminError(
      `Ambiguous key "${clip(reference)}": it matches API keys ${candidates.join(", ")}${
        byId ? ` (${byId.id} by id)` : ""
      }; give the numeric id or more of the key`,
    );
  }
  if (byId !== undefined) return { key: byId, description: `API key ${byId.id}` };
  if (byPrefix.length === 1) {
    const key = store.findApiKeyById(byPrefix[0].id)!;
    return { key, description: `API key ${key.id} (prefix ${key.prefix})` };
  }
  if (prefix.length > 0 && prefix.length < MIN_PREFIX && !/^[0-9]+$/.test(prefix)) {
    throw new AdminError(
      `Key prefix "${
        clip(reference)
      }" is too short: give at least ${MIN_PREFIX} characters or the id`,
    );
  }
  throw new AdminError(
    `No API key "${clip(reference)}": expected a key id, a key prefix or a whole key ` +
      "(see deno task admin key list)",
  );
}

/**
 * A stored prefix is the key's first 8 characters: a longer reference (up to a
 * whole key) must start with it, a shorter one must be its start.
 */
function prefixMatches(stored: string, reference: string): boolean {
  return reference.length <= stored.length
    ? stored.startsWith(reference)
    : reference.startsWith(stored);
}

/** Shortens user input quoted in a message. */
export function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

/**
 * The user whose e-mail is canonically equal to `email` (NFC, lower case),
 * also a row written before e-mails were stored in NFC.
 */
export function findCanonicalUser(store: Store, email: string): User | undefined {
  return store.findUserByEmail(email) ??
    store.listUsers().find((user) => toCanonicalEmail(user.email) === email);
}
