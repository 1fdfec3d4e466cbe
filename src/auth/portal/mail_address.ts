/**
 * The addresses the portal mails to: one RFC 5321 mailbox in its plain form (an addr-spec of
 * dot-atoms), never a list, a display name, a comment or a quoted local part. A mail library
 * reads `a@x.test,b@y.test`, `a;b@x.test` or `<a@x.test>` as several recipients or as a name
 * and an address, so an address of another shape would let a sign-up mail strangers, or pass
 * the `domains` mode with a domain that is not the one mailed.
 *
 * One canonical form for every portal lookup ({@link toPortalEmail}): sign-up stores it, and
 * sign-in, verification, forgot-password, reset, a change of address and the throttle's keys
 * look addresses up in it, so two spellings of one mailbox (letter case, NFC, and a domain as
 * IDNA spells it: `exämple.org`, `xn--exmple-cua.org` and `ｅxämple.org` are one domain)
 * reach one account and one throttle budget.
 *
 * @module
 */
import { domainToASCII, domainToUnicode } from "node:url";
import { MAX_EMAIL_LENGTH, normalizeEmail } from "../account_rules.ts";
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
 * An address in the portal's canonical form: the account form (`normalizeEmail`: NFC, lower
 * case) with its domain as IDNA maps it (UTS 46: full-width letters, `xn--` labels and
 * Unicode labels of one domain become its one Unicode form); a domain IDNA refuses stays as
 * given. Not checked otherwise (a lookup of a malformed address finds nothing); at most
 * {@link MAX_EMAIL_LENGTH} characters.
 */
export function toPortalEmail(text: unknown): string {
  const email = normalizeEmail(String(text ?? "")).slice(0, MAX_EMAIL_LENGTH);
  const at = email.lastIndexOf("@");
  if (at < 0) return email;
  const ascii = domainToASCII(email.slice(at + 1));
  if (ascii === "") return email;
  return normalizeEmail(`${email.slice(0, at)}@${domainToUnicode(ascii)}`).slice(
    0,
    MAX_EMAIL_LENGTH,
  );
}

/**
 * Whether `email` may use the portal under `policy`: any address, but in `domains` mode only
 * one whose domain is in `domains` (compared in their ASCII form, as `--portal-domains` is
 * written). Sign-up, a change of address and every sign-in and reset (`isActive`) ask this.
 */
export function isAllowedDomain(
  email: string,
  policy: { mode?: string; domains?: readonly string[] },
): boolean {
  if (policy.mode !== "domains") return true;
  const domain = domainToASCII(email.slice(email.lastIndexOf("@") + 1));
  return domain !== "" && (policy.domains ?? []).includes(domain);
}

/**
 * The e-mail address of a portal sign-up, forgot-password or change of address, in the
 * portal's canonical form ({@link toPortalEmail}): an account's address (`toAccountEmail`)
 * that is also one plain mailbox ({@link isMailboxAddress}).
 *
 * @throws {AuthError} `invalid_request` otherwise.
 */
export function toMailboxEmail(text: string): string {
  const email = toPortalEmail(toAccountEmail(text));
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
