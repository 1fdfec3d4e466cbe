/**
 * The admin CLI's argument values: e-mails, passwords, durations, times, and
 * references to users and API keys (numeric id, unambiguous prefix or whole
 * key), each failing with one line that says what was expected.
 *
 * @module
 */
import { isPasswordSized, MAX_PASSWORD_BYTES } from "../auth/account_rules.ts";
import { hashSecret, normalizeApiKey } from "../auth/credentials.ts";
import { findUserOrFail } from "../auth/users.ts";
import { parseDuration } from "../platform/duration.ts";
import type { ApiKey, Store, User } from "../store/store.ts";
import { AdminError } from "./io.ts";

/** A password read from standard input. */
export function toPassword(password: string): string {
  if (!isPasswordSized(password)) {
    throw new AdminError(
      `Invalid password: expected 1 to ${MAX_PASSWORD_BYTES} bytes on standard input`,
      2,
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
      `Invalid ${what} "${
        clip(text)
      }": expected a whole number and a unit, like 90s, 15m, 10h, 7d` +
        ", at most 10000000d",
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
export async function findUser(store: Store, email: string): Promise<User> {
  return await findUserOrFail(store, email);
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
export async function findKey(store: Store, reference: string): Promise<KeyMatch> {
  const text = reference.trim().replace(/…$/, "");
  const whole = normalizeApiKey(text);
  if (whole !== undefined) {
    const key = await store.findApiKeyByHash(hashSecret(whole));
    if (key === undefined) throw new AdminError("No such API key (the whole key was given)");
    return { key, description: `API key ${key.id}` };
  }
  const isId = /^[1-9][0-9]{0,15}$/.test(text);
  const prefix = text.toLowerCase();
  const isPrefixShaped = /^[0-9a-f-]+$/.test(prefix);
  // A reference that can never match is the caller's mistake, whatever the database holds.
  if (!isId && isPrefixShaped && prefix.length < MIN_PREFIX) {
    throw new AdminError(
      `Key prefix "${
        clip(reference)
      }" is too short: give at least ${MIN_PREFIX} characters or the id`,
      2,
    );
  }
  if (!isId && !isPrefixShaped) {
    throw new AdminError(
      `Invalid KEY "${clip(reference)}": expected a key id, a key prefix ` +
        `(at least ${MIN_PREFIX} of 0-9, a-f and -) or a whole key`,
      2,
    );
  }
  const byId = isId ? await store.findApiKeyById(Number(text)) : undefined;
  const byPrefix = prefix.length >= MIN_PREFIX && isPrefixShaped
    ? (await store.listApiKeys()).filter((key) => prefixMatches(key.prefix, prefix))
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
    const key = (await store.findApiKeyById(byPrefix[0].id))!;
    return { key, description: `API key ${key.id} (prefix ${key.prefix})` };
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
