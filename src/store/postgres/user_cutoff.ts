/**
 * The per-user revoke-before cutoff on PostgreSQL: a helper of the user, token and portal
 * groups (a new password, disabling, `revokeTokensOfUser`), not a method group of its own.
 *
 * @module
 */
import type postgres from "postgres";
import type { Row } from "../rows.ts";

/**
 * Moves user `userId`'s cutoff forward (never back), holding the user's row
 * lock, and returns how many live tokens that ended: to `before`, or
 * without it past both the old cutoff and `now`. Part of the caller's
 * transaction, which must bump the grant epoch.
 */
export async function raiseCutoff(
  tx: postgres.TransactionSql,
  userId: number,
  now: number,
  before?: number,
  keepSession?: Uint8Array,
): Promise<number> {
  const [user] = await tx<Row[]>`
    SELECT tokens_valid_from FROM users WHERE id = ${userId} FOR UPDATE`;
  if (user === undefined) return 0;
  const from = user.tokens_valid_from as number;
  // Without `before`: past every token issued so far too (a login that committed while this
  // transaction waited for the row, with an issue time later than this writer's clock).
  let cutoff = before;
  if (cutoff === undefined) {
    const [{ latest }] = await tx<{ latest: number | null }[]>`
      SELECT max(issued_at) AS latest FROM tokens WHERE user_id = ${userId}`;
    cutoff = Math.max(from + 1, now + 1, Number(latest ?? 0) + 1);
  }
  const [{ n }] = await tx<{ n: number }[]>`
    SELECT count(*) AS n FROM tokens
    WHERE user_id = ${userId} AND revoked_at IS NULL AND expires_at > ${now}
      AND issued_at >= ${from} AND issued_at < ${cutoff}`;
  // As on SQLite: updated_at moves even when an earlier cutoff leaves tokens_valid_from as it was.
  await tx`UPDATE users SET tokens_valid_from = greatest(tokens_valid_from, ${cutoff}),
    updated_at = ${now} WHERE id = ${userId}`;
  // Every cutoff raise (password, disable, revoke-all) ends the user's portal sessions too, but
  // the one a self-service password change was made in.
  if (keepSession === undefined) await tx`DELETE FROM portal_sessions WHERE user_id = ${userId}`;
  else {
    await tx`DELETE FROM portal_sessions WHERE user_id = ${userId} AND id_hash <> ${keepSession}`;
  }
  return n;
}
