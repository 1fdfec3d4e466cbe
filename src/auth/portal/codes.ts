/**
 * One-time codes and portal session ids: generated from the system's CSPRNG, stored only as
 * digests. A code is ten letters and digits a person can type (`K7QM2-XT9PA`, about 49 bits),
 * bound to its user in its digest, which is an HMAC-SHA-256 keyed by `--portal-secret-file`
 * (kept outside the database, so a database reader cannot try codes offline; required with
 * the portal on); a session id is 256 random bits (SHA-256 is enough for those).
 *
 * @module
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { hashSecret } from "../credentials.ts";

/** Letters and digits without look-alikes (0/O, 1/I/L, U/V). */
const CODE_ALPHABET = "ABCDEFGHJKMNPQRSTWXYZ23456789";
const CODE_LENGTH = 10;
/** Wrong codes a code survives; then it is dead and a new one must be asked for. */
export const MAX_CODE_ATTEMPTS = 5;

/** A new code, as mailed: two groups of five. */
export function generateCode(): string {
  let code = "";
  const limit = 256 - (256 % CODE_ALPHABET.length);
  while (code.length < CODE_LENGTH) {
    for (const byte of randomBytes(16)) {
      if (byte < limit && code.length < CODE_LENGTH) {
        code += CODE_ALPHABET[byte % CODE_ALPHABET.length];
      }
    }
  }
  return `${code.slice(0, 5)}-${code.slice(5)}`;
}

/** A code as typed, in its canonical form (upper case, no separators), or `undefined`. */
export function normalizeCode(text: string): string | undefined {
  const code = text.toUpperCase().replace(/[\s-]/g, "");
  return code.length === CODE_LENGTH && [...code].every((c) => CODE_ALPHABET.includes(c))
    ? code
    : undefined;
}

/**
 * The stored digest of a code mailed to `email` (bound to it: a code works for its address
 * only): HMAC-SHA-256 with `key` (`--portal-secret-file`). There is no unkeyed form: a plain
 * digest of ~49 bits could be tried offline by whoever reads the database.
 */
export function hashCode(email: string, code: string, key: Uint8Array): Uint8Array {
  const text = `portal-code:${email}:${normalizeCode(code) ?? code}`;
  return new Uint8Array(createHmac("sha256", key).update(text).digest());
}

/** Whether two digests are equal, in constant time. */
export function isSameDigest(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A new session id (base64url, 43 characters). */
export function generateSessionId(): string {
  return randomBytes(32).toString("base64url");
}

/** Whether `text` has the shape of a session id (checked before any lookup). */
export function isSessionIdShaped(text: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(text);
}

/** The CSRF token of a session: derived from its id, so it needs no storage of its own. */
export function toCsrfToken(sessionId: string): string {
  return Buffer.from(hashSecret(`portal-csrf:${sessionId}`)).toString("base64url");
}
