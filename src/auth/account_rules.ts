/**
 * The rules for e-mail addresses and passwords, in one place: the token
 * endpoint checks a login's fields against the login bounds, and adding a
 * user (the admin CLI) checks an address against the stricter rule for new
 * accounts. Both check sizes before any hashing.
 *
 * @module
 */
import { toCanonicalEmail } from "../store/canonical_emails.ts";

/** Longest e-mail address accepted (RFC 5321's path limit). */
export const MAX_EMAIL_LENGTH = 254;
/** Shortest e-mail address a new account may have (`a@b`). */
export const MIN_EMAIL_LENGTH = 3;
/** Longest password accepted, in UTF-8 bytes; checked before any hashing. */
export const MAX_PASSWORD_BYTES = 1024;

const utf8 = new TextEncoder();

// deno-lint-ignore no-control-regex
const INVALID_EMAIL_CHARACTER = /[\s\x00-\x1f\x7f-\x9f]/;
// deno-lint-ignore no-control-regex
const CONTROL_CHARACTER = /[\x00-\x1f\x7f-\x9f]/;

/**
 * Whether `text` holds a control character (C0, DEL or C1): refused in every
 * name and label keygate stores, since a terminal that prints one may act on it.
 */
export function hasControlCharacter(text: string): boolean {
  return CONTROL_CHARACTER.test(text);
}

/**
 * The form in which e-mail addresses are stored and compared: Unicode NFC
 * and lower case (see `toCanonicalEmail`).
 */
export function normalizeEmail(email: string): string {
  return toCanonicalEmail(email);
}

/**
 * Whether a login's e-mail is within bounds (1 to {@link MAX_EMAIL_LENGTH}
 * characters). Whatever its shape, an unknown address then fails like a
 * wrong password.
 */
export function isLoginEmailSized(email: string): boolean {
  return email !== "" && email.length <= MAX_EMAIL_LENGTH;
}

/**
 * Whether an address may name a new account: {@link MIN_EMAIL_LENGTH} to
 * {@link MAX_EMAIL_LENGTH} characters, an `@`, no white space or control characters
 * (C0, DEL or C1).
 */
export function isAccountEmail(email: string): boolean {
  return email.length >= MIN_EMAIL_LENGTH && email.length <= MAX_EMAIL_LENGTH &&
    email.includes("@") && !INVALID_EMAIL_CHARACTER.test(email);
}

/** Whether a password is 1 to {@link MAX_PASSWORD_BYTES} bytes in UTF-8. */
export function isPasswordSized(password: string): boolean {
  return password !== "" && utf8.encode(password).byteLength <= MAX_PASSWORD_BYTES;
}
