/**
 * The addresses the portal mails to: one RFC 5321 mailbox in its plain form (an addr-spec of
 * dot-atoms), never a list, a display name, a comment or a quoted local part. A mail library
 * reads `a@x.test,b@y.test`, `a;b@x.test` or `<a@x.test>` as several recipients or as a name
 * and an address, so an address of another shape would let a sign-up mail strangers, or pass
 * the `domains` mode with a domain that is not the one mailed.
 *
 * @module
 */
import { AuthError } from "../errors.ts";
import { toAccountEmail } from "../users.ts";

/** A dot-atom: atext (RFC 5322, and any non-ASCII character: RFC 6531) between single dots. */
const LOCAL =
  /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\u0080-\u{10FFFF}]+(?:\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\u0080-\u{10FFFF}]+)*$/u;
/** Host-name labels (letters, digits, inner hyphens; non-ASCII for IDNs) between single dots. */
const DOMAIN =
  /^(?:[a-z0-9\u0080-\u{10FFFF}](?:[a-z0-9\u0080-\u{10FFFF}-]*[a-z0-9\u0080-\u{10FFFF}])?\.)*[a-z0-9\u0080-\u{10FFFF}](?:[a-z0-9\u0080-\u{10FFFF}-]*[a-z0-9\u0080-\u{10FFFF}])?$/u;

/** Whether a (normalised) address is one plain mailbox: `local@domain`, dot-atoms both. */
export function isMailboxAddress(email: string): boolean {
  const at = email.indexOf("@");
  if (at < 1 || at !== email.lastIndexOf("@")) return false;
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  return local.length <= 64 && LOCAL.test(local) && DOMAIN.test(domain);
}

/**
 * The e-mail address of a portal sign-up or reset request, normalised: an account's address
 * (`toAccountEmail`) that is also one plain mailbox ({@link isMailboxAddress}).
 *
 * @throws {AuthError} `invalid_request` otherwise.
 */
export function toMailboxEmail(text: string): string {
  const email = toAccountEmail(text);
  if (!isMailboxAddress(email)) {
    throw new AuthError(
      "invalid_request",
      `Invalid e-mail "${
        text.slice(0, 64)
      }": expected one address such as dev@example.org, without a name, list, quotes, ` +
        "brackets or spaces",
    );
  }
  return email;
}
