/**
 * Deleting a user on SQLite, inside the caller's write: the one deletion that `deleteUser`
 * (users.ts) and the janitor's `deleteUnverifiedPortalUsers` (portal.ts) both run. The user's
 * audit rows are made anonymous first (audit_anonymize.ts), then its tokens, its keys'
 * login-failure counters and the counters `forgetCounters` names, its keys and the user go; the
 * portal's rows go by cascade.
 *
 * @module
 */
import type { AuditAnonymizing, DeletedUser } from "../store.ts";
import { toPrefixEnd } from "../prefix_end.ts";
import { createAuditAnonymizer } from "./audit_anonymize.ts";
import type { Connection, Row } from "./connection.ts";

/** Deletes one user within a write; `undefined` when there is no such user. */
export type UserDeletion = (
  userId: number,
  anonymizing: AuditAnonymizing,
) => DeletedUser | undefined;

/** Prepares the deletion's statements on `conn`. */
export function createUserDeletion(conn: Connection): UserDeletion {
  const { sql } = conn;
  const anonymizeAudit = createAuditAnonymizer(conn);
  const userEmail = sql("SELECT email FROM users WHERE id = :id");
  // Alter grants (the triggers record each scope).
  const tokensDelete = sql("DELETE FROM tokens WHERE user_id = :user_id");
  // Keeps grants: the counters of the user's keys hold no grant.
  const failuresDelete = sql(
    `DELETE FROM login_failures WHERE subject IN (
       SELECT 'key:' || id FROM api_keys WHERE user_id = :user_id)`,
    "keeps-grants",
  );
  // By the subject's index: every subject from the prefix up to the least string above all that
  // start with it (toPrefixEnd, in the BINARY collation's order), the range PostgreSQL reads too.
  const prefixDelete = sql(
    "DELETE FROM login_failures WHERE subject >= :prefix AND subject < :end",
    "keeps-grants",
  );
  // Keeps grants: the default's counters of the user's keys (their own limits' go with the keys).
  // A key id can come back on SQLite (the largest is reused), and must not find them.
  const defaultCountersDelete = sql(
    `DELETE FROM limit_usage WHERE limit_id IN (SELECT id FROM limits WHERE scope = 'default')
       AND subject_id IN (SELECT id FROM api_keys WHERE user_id = :user_id)`,
    "keeps-grants",
  );
  const keysDelete = sql("DELETE FROM api_keys WHERE user_id = :user_id");
  const userDelete = sql("DELETE FROM users WHERE id = :id");
  return (userId, { anonymousRef, anonymousActor, forgetCounters = [] }) => {
    const row = userEmail.get({ id: userId }) as Row | undefined;
    if (row === undefined) return undefined;
    const user = { id: userId, email: row.email as string, actor: anonymousActor };
    const auditRows = anonymizeAudit(user, anonymousRef);
    const tokens = Number(tokensDelete.run({ user_id: userId }).changes);
    failuresDelete.run({ user_id: userId });
    for (const prefix of forgetCounters) prefixDelete.run({ prefix, end: toPrefixEnd(prefix) });
    defaultCountersDelete.run({ user_id: userId });
    const apiKeys = Number(keysDelete.run({ user_id: userId }).changes);
    userDelete.run({ id: userId });
    return { apiKeys, tokens, auditRows };
  };
}
