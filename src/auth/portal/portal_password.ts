/**
 * The rules of a new portal password (sign-up, reset, change): the login bounds, a minimum
 * length, not on the shipped list of common passwords, not the address.
 *
 * @module
 */
import { isPasswordSized, MAX_PASSWORD_BYTES } from "../account_rules.ts";
import { AuthError } from "../errors.ts";
import { isCommonPassword, MIN_PORTAL_PASSWORD_LENGTH } from "./common_passwords.ts";

/**
 * A new password for a portal account: the login bounds, at least
 * {@link MIN_PORTAL_PASSWORD_LENGTH} characters, not on the shipped list of common passwords
 * and not the e-mail address.
 *
 * @throws {AuthError} `invalid_request` saying which rule failed.
 */
export function toPortalPassword(password: unknown, email: string): string {
  if (typeof password !== "string" || !isPasswordSized(password)) {
    throw new AuthError(
      "invalid_request",
      `Invalid password: expected 1 to ${MAX_PASSWORD_BYTES} bytes`,
    );
  }
  if ([...password].length < MIN_PORTAL_PASSWORD_LENGTH) {
    throw new AuthError(
      "invalid_request",
      `Invalid password: expected at least ${MIN_PORTAL_PASSWORD_LENGTH} characters`,
    );
  }
  const lower = password.toLowerCase();
  if (isCommonPassword(password) || lower === email || lower === email.split("@")[0]) {
    throw new AuthError(
      "invalid_request",
      "Invalid password: it is too common or too easy to guess",
    );
  }
  return password;
}
