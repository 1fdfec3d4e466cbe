/**
 * Deleting a user on PostgreSQL, inside the caller's transaction: the one deletion that
 * `deleteUser` (users.ts) and the janitor's `deleteUnverifiedPortalUsers` (portal.ts) both run.
 * The user's audit rows are made anonymous first (audit_anonymize.ts), then its tokens, its
 * keys' login-failure counters and the counters `forgetCounters` names, its keys, its portal rows
 * and the user go.
 *
 * @module
 */
import type postgres from "postgres";
import type { AuditAnonymizing, DeletedUser, PortalAccountState } from "../store.ts";
import type { Row } from "../rows.ts";
import { StoreConflict } from "../errors.ts";
import { toPrefixEnd } from "../prefix_end.ts";
import { anonymizeAudit } from "./audit_anonymize.ts";

/**
 * Forgets the counters whose subject starts with `$1`: the range of the "C" (byte) order from
 * `$1` to `$2` (`toPrefixEnd`, prefix_end.ts), which `login_failures_by_subject_c` (migration 14) serves
 * whatever the database's collation (under another, the primary key cannot serve a prefix, and
 * `starts_with` alone read every counter), and `starts_with` keeps it exact.
 */
export const FORGET_COUNTERS_SQL = `DELETE FROM login_failures
  WHERE subject COLLATE "C" >= $1 AND subject COLLATE "C" < $2 AND starts_with(subject, $1)`;

/**
 * Deletes user `userId` and every row of it; resolves to what went, or `undefined` when there
 * is no such user. The caller's transaction records the user's grant scope. With
 * `onlyPortalState`, only while the user's portal account is in that state (checked under the
 * account's lock).
 * @throws {StoreConflict} with `onlyPortalState`, when the account is not in it (or gone).
 */
export async function deleteUserRows(
  tx: postgres.TransactionSql,
  userId: number,
  { anonymousRef, anonymousActor, forgetCounters = [] }: AuditAnonymizing,
  { onlyPortalState }: { onlyPortalState?: PortalAccountState } = {},
): Promise<DeletedUser | undefined> {
  // Keys before their user, as a login does (its key's row, then the user's for the token's
  // foreign key): the same order, so a login and a delete never deadlock.
  await tx`SELECT id FROM api_keys WHERE user_id = ${userId} ORDER BY id FOR UPDATE`;
  const [user] = await tx<Row[]>`SELECT email FROM users WHERE id = ${userId} FOR UPDATE`;
  if (onlyPortalState !== undefined) {
    // Users, then the account: the order an approval locks them in (portal.ts).
    const [account] = await tx<Row[]>`SELECT state FROM portal_accounts
      WHERE user_id = ${userId} FOR UPDATE`;
    if (account?.state !== onlyPortalState) {
      throw new StoreConflict(`The portal account is not ${onlyPortalState}`);
    }
  }
  if (user === undefined) return undefined;
  const auditRows = await anonymizeAudit(tx, {
    id: userId,
    email: user.email as string,
    actor: anonymousActor,
  }, anonymousRef);
  const tokens = await tx`DELETE FROM tokens WHERE user_id = ${userId} RETURNING id`;
  await tx`DELETE FROM login_failures WHERE subject IN (
      SELECT 'key:' || id FROM api_keys WHERE user_id = ${userId})`;
  for (const prefix of forgetCounters) {
    await tx.unsafe(FORGET_COUNTERS_SQL, [prefix, toPrefixEnd(prefix)]);
  }
  // The default's counters of the user's keys (their own limits' go with the keys).
  await tx`DELETE FROM limit_usage WHERE limit_id IN (SELECT id FROM limits WHERE scope = 'default')
      AND subject_id IN (SELECT id FROM api_keys WHERE user_id = ${userId})`;
  const keys = await tx`DELETE FROM api_keys WHERE user_id = ${userId} RETURNING id`;
  // The portal's rows hold no foreign key (a restored older dump must be able to drop
  // users: docs/postgres.md), so they go here.
  await tx`DELETE FROM portal_accounts WHERE user_id = ${userId}`;
  await tx`DELETE FROM portal_codes WHERE user_id = ${userId}`;
  await tx`DELETE FROM portal_sessions WHERE user_id = ${userId}`;
  await tx`DELETE FROM users WHERE id = ${userId}`;
  return { apiKeys: keys.length, tokens: tokens.length, auditRows };
}
