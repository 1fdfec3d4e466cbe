/**
 * The per-user revoke-before cutoff on SQLite: a helper of the user and token
 * groups (users.ts: a new password, disabling; tokens.ts: `revokeTokensOfUser`),
 * not a method group of its own. Runs inside the caller's write.
 *
 * @module
 */
import type { Connection, Row } from "./connection.ts";

/** Moving a user's cutoff, within a write (see {@link createUserCutoff}). */
export interface UserCutoff {
  /** The cutoff for "everything issued up to now": strictly increasing, see docs/operations.md. */
  nextCutoff(userId: number, now: number): number;
  /**
   * Raises the cutoff (never lowers it) and ends the user's portal sessions but `keepSession`
   * (the one a self-service password change was made in); returns how many live tokens it ended.
   */
  revokeTokensBefore(
    userId: number,
    cutoff: number,
    now: number,
    keepSession?: Uint8Array | null,
  ): number;
}

/** Prepares the cutoff's statements on `conn`. */
export function createUserCutoff(conn: Connection): UserCutoff {
  const { sql } = conn;
  const userById = sql("SELECT tokens_valid_from FROM users WHERE id = :id");
  // Moves the user's cutoff forward only: an earlier cutoff must never revive tokens.
  const userRaiseCutoff = sql(
    `UPDATE users SET tokens_valid_from = max(tokens_valid_from, :cutoff), updated_at = :now
     WHERE id = :id`,
  );
  // Every cutoff raise (password, disable, revoke-all) ends the user's portal sessions too.
  const userSessionsDelete = sql(
    `DELETE FROM portal_sessions WHERE user_id = :user_id AND (:keep IS NULL OR id_hash <> :keep)`,
    "keeps-grants",
  );
  const tokensLatest = sql(
    "SELECT max(issued_at) AS latest FROM tokens WHERE user_id = :user_id",
  );
  const tokensLiveBefore = sql(
    `SELECT count(*) AS n FROM tokens
     WHERE user_id = :user_id AND revoked_at IS NULL AND expires_at > :now
       AND issued_at >= :from AND issued_at < :cutoff`,
  );
  return {
    nextCutoff(userId, now) {
      const row = userById.get({ id: userId }) as Row | undefined;
      const current = (row?.tokens_valid_from as number | undefined) ?? 0;
      // Past every token issued so far too: a login that committed just before this write,
      // with an issue time later than this writer's clock, must not outlive it.
      const { latest } = tokensLatest.get({ user_id: userId }) as { latest: number | null };
      return Math.max(current + 1, now + 1, (latest ?? 0) + 1);
    },
    revokeTokensBefore(userId, cutoff, now, keepSession = null) {
      const row = userById.get({ id: userId }) as Row | undefined;
      const from = (row?.tokens_valid_from as number | undefined) ?? 0;
      const { n } = tokensLiveBefore.get({ user_id: userId, now, from, cutoff }) as { n: number };
      userRaiseCutoff.run({ id: userId, cutoff, now });
      userSessionsDelete.run({ user_id: userId, keep: keepSession });
      return n;
    },
  };
}
