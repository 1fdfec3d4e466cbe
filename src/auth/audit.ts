/**
 * The vocabulary of the audit log: its actions and how actors and subjects
 * are written. Rows are appended through the store (`appendAudit`), in the
 * same transaction as the change they record where there is one.
 *
 * Nothing secret goes in: subjects are e-mails of known users and numeric
 * ids of keys and tokens, never keys, tokens, passwords or their digests.
 *
 * @module
 */
import { toPrintable } from "../formats/printable.ts";

/** Every action the audit log records. */
export const AUDIT_ACTIONS = [
  // Admin changes (actor `cli:<user>`).
  "user.added",
  "user.disabled",
  "user.enabled",
  "user.timeout_changed",
  "user.password_changed",
  "user.renamed",
  "user.deleted",
  "key.created",
  "key.rotated",
  "key.disabled",
  "key.enabled",
  "key.revoked",
  "tokens.revoked",
  "tokens.purged",
  "throttle.cleared",
  "db.restored",
  "limit.set",
  "limit.removed",
  // Security events from the HTTP API (actor `api_key:<id>` or `anonymous`).
  "token.issued",
  "login.failed",
  "token.revoked",
  // Operators of the admin API (src/auth/operators.ts); their changes above have actor
  // `operator:<name>`.
  "operator.created",
  "operator.revoked",
  "operator.login_failed",
  // The janitor's audit retention (--audit-retention; actor `janitor`, subject `audit_log`).
  "audit.pruned",
  // What operators were refused or read in bulk (src/http/admin/admin_app.ts, read_meter.ts).
  "operator.forbidden",
  "operator.bulk_read",
  // The developer portal (src/auth/portal/; actor `portal:<client address>` before sign-in,
  // `portal:user:<id>` after).
  "portal.signed_up",
  "portal.sign_up_repeated",
  "portal.verified",
  "portal.code_failed",
  "portal.approved",
  "portal.refused",
  "portal.signed_in",
  "portal.sign_in_failed",
  "portal.signed_out",
  "portal.reset_requested",
  "portal.password_reset",
  "portal.password_changed",
  "portal.email_change_requested",
  "portal.email_changed",
  "portal.key_labelled",
  "portal.account_deleted",
  // An operator's user given a portal account (--portal-existing-users off; actor `cli:<user>`).
  "portal.enrolled",
  // The janitor's expiry of sign-ups never verified (--portal-unverified-ttl; actor `janitor`,
  // subject a random `user:deleted:…` per account, never its e-mail).
  "portal.unverified_deleted",
] as const;

/** One of {@link AUDIT_ACTIONS}. */
export type AuditAction = typeof AUDIT_ACTIONS[number];

/** The actor of an admin command: the operating-system user from `$USER` or `$LOGNAME`. */
export function toCliActor(env: Readonly<Record<string, string | undefined>>): string {
  const name = env.SUDO_USER || env.USER || env.LOGNAME || "unknown";
  // Escaped as stored, so that the audit log's actor cannot hide or reorder its text.
  return `cli:${toPrintable(name.slice(0, 64), false)}`;
}

/** The actor of a change made through the admin API, and the subject naming an operator. */
export function toOperatorRef(name: string): string {
  return `operator:${name}`;
}

/** The actor or subject naming an API key, by id. */
export function toKeyRef(apiKeyId: number): string {
  return `api_key:${apiKeyId}`;
}

/** The subject naming a user, by (lower-cased) e-mail. */
export function toUserRef(email: string): string {
  return `user:${email}`;
}
