/**
 * The rules for e-mail addresses and passwords, in one place: the token
 * endpoint checks a login's fields against the login bounds, and adding a
 * user (the admin CLI) checks an address against the stricter rule for new
 * accounts. Both check sizes before any hashing.
 *
 * @module
 */
import { UNSAFE_CHARACTERS } from "../formats/printable.ts";
import { toCanonicalEmail } from "../store/canonical_emails.ts";

/** Longest e-mail address accepted (RFC 5321's path limit). */
export const MAX_EMAIL_LENGTH = 254;
/** Shortest e-mail address a new account may have (`a@b`). */
export const MIN_EMAIL_LENGTH = 3;
/** Longest password accepted, in UTF-8 bytes; checked before any hashing. */
export const MAX_PASSWORD_BYTES = 1024;

const utf8 = new TextEncoder();

/**
 * The first character of `text` that no name, label or e-mail keygate stores may hold, as
 * `U+202E`, or `undefined`: a control character (C0, DEL or C1), which a terminal that prints
 * it may act on, or an invisible or bidirectional one (zero-width, bidi controls, any other
 * format or default-ignorable character, a lone surrogate, a line or paragraph separator, white
 * space but U+0020), which makes one name look like another in the console, the CLI's tables
 * and the audit log (see `UNSAFE_CHARACTERS`, src/formats/printable.ts).
 */
export function findUnsafeCharacter(text: string): string | undefined {
  const found = text.match(new RegExp(UNSAFE_CHARACTERS.source, "u"));
  if (found === null) return undefined;
  return `U+${found[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
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
 * {@link MAX_EMAIL_LENGTH} characters, an `@`, no white space, and none of the characters
 * {@link findUnsafeCharacter} finds.
 */
export function isAccountEmail(email: string): boolean {
  return email.length >= MIN_EMAIL_LENGTH && email.length <= MAX_EMAIL_LENGTH &&
    email.includes("@") && !/\s/.test(email) && findUnsafeCharacter(email) === undefined;
}

/** Whether a password is 1 to {@link MAX_PASSWORD_BYTES} bytes in UTF-8. */
export function isPasswordSized(password: string): boolean {
  return password !== "" && utf8.encode(password).byteLength <= MAX_PASSWORD_BYTES;
}
