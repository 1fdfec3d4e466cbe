/**
 * The users table, and the revoke-before cutoff it holds for each user's tokens.
 *
 * @module
 */
import type { TokenStore, UserStore } from "../store.ts";
import type { Connection, Row } from "./connection.ts";
import { toUser } from "../rows.ts";

export function createUserStore(
  conn: Connection,
): Omit<UserStore, "findUserAndKey"> & Pick<TokenStore, "revokeTokensOfUser"> {
  const { sql } = conn;
  const userByEmail = sql("SELECT * FROM users WHERE email = :email");
  const usersAll = sql("SELECT * FROM users ORDER BY email");
  const userById = sql("SELECT * FROM users WHERE id = :id");
  // Keeps grants: a new user has no tokens yet.
  const userInsert = sql(
    `INSERT INTO users (email, password_hash, token_timeout_seconds, created_at, updated_at)
     VALUES (:email, :password_hash, :timeout, :now, :now) RETURNING *`,
    "keeps-grants",
  );
  const userSetTimeout = sql(
    "UPDATE users SET token_timeout_seconds = :timeout, updated_at = :now WHERE id = :id",
  );
  const userSetPassword = sql(
    "UPDATE users SET password_hash = :password_hash, updated_at = :now WHERE id = :id",
  );
  const userSetDisabled = sql(
    "UPDATE users SET disabled = :disabled, updated_at = :now WHERE id = :id",
  );
  // Alters grants: a cached grant carries the e-mail (token_info, X-Keygate-Email).
  const userSetEmail = sql("UPDATE users SET email = :email, updated_at = :now WHERE id = :id");
  const userTokensDelete = sql("DELETE FROM tokens WHERE user_id = :user_id");
  // Keeps grants: the counters of the user's keys hold no grant.
  const userFailuresDelete = sql(
    `DELETE FROM login_failures WHERE subject IN (
       SELECT 'key:' || id FROM api_keys WHERE user_id = :user_id)`,
    "keeps-grants",
  );
  const userKeysDelete = sql("DELETE FROM api_keys WHERE user_id = :user_id");
  const userDelete = sql("DELETE FROM users WHERE id = :id");
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

  /** The cutoff for "everything issued up to now": strictly increasing, see docs/operations.md. */
  function nextCutoff(userId: number, now: number): number {
    const row = userById.get({ id: userId }) as Row | undefined;
    const current = (row?.tokens_valid_from as number | undefined) ?? 0;
    // Past every token issued so far too: a login that committed just before this write, with
    // an issue time later than this writer's clock, must not outlive it.
    const { latest } = tokensLatest.get({ user_id: userId }) as { latest: number | null };
    return Math.max(current + 1, now + 1, (latest ?? 0) + 1);
  }

  /** Raises the cutoff and ends the portal sessions; returns how many live tokens it ended. */
  function revokeTokensBefore(
    userId: number,
    cutoff: number,
    now: number,
    keepSession: Uint8Array | null = null,
  ): number {
    const row = userById.get({ id: userId }) as Row | undefined;
    const from = (row?.tokens_valid_from as number | undefined) ?? 0;
    const { n } = tokensLiveBefore.get({ user_id: userId, now, from, cutoff }) as { n: number };
    userRaiseCutoff.run({ id: userId, cutoff, now });
    userSessionsDelete.run({ user_id: userId, keep: keepSession });
    return n;
  }

  return {
    findUserByEmail(email) {
      return conn.read(() => {
        const row = userByEmail.get({ email }) as Row | undefined;
        return row && toUser(row);
      });
    },

    findUserById(id) {
      return conn.read(() => {
        const row = userById.get({ id }) as Row | undefined;
        return row && toUser(row);
      });
    },

    listUsers() {
      return conn.read(() => (usersAll.all() as Row[]).map(toUser));
    },

    insertUser(user, { now, audit }) {
      return conn.write(() =>
        toUser(userInsert.get({
          email: user.email,
          password_hash: user.passwordHash,
          timeout: user.tokenTimeoutSeconds,
          now,
        }) as Row), audit);
    },

    updateUserTimeout(userId, { tokenTimeoutSeconds, now, audit }) {
      return conn.write(() => {
        userSetTimeout.run({ id: userId, timeout: tokenTimeoutSeconds, now });
      }, audit);
    },

    updateUserPassword(userId, { passwordHash, now, audit, keepPortalSession }) {
      return conn.write(() => {
        userSetPassword.run({ id: userId, password_hash: passwordHash, now });
        return revokeTokensBefore(userId, nextCutoff(userId, now), now, keepPortalSession ?? null);
      }, audit);
    },

    updateUserDisabled(userId, { disabled, now, audit }) {
      return conn.write(() => {
        userSetDisabled.run({ id: userId, disabled: disabled ? 1 : 0, now });
        return disabled ? revokeTokensBefore(userId, nextCutoff(userId, now), now) : 0;
      }, audit);
    },

    updateUserEmail(userId, { email, now, audit }) {
      return conn.write(() => {
        userSetEmail.run({ id: userId, email, now });
      }, audit);
    },

    deleteUser(userId, { audit }) {
      return conn.write(() => {
        const tokens = Number(userTokensDelete.run({ user_id: userId }).changes);
        userFailuresDelete.run({ user_id: userId });
        const apiKeys = Number(userKeysDelete.run({ user_id: userId }).changes);
        userDelete.run({ id: userId });
        return { apiKeys, tokens };
      }, audit);
    },

    revokeTokensOfUser(userId, { before, now, audit }) {
      return conn.write(
        () => revokeTokensBefore(userId, before ?? nextCutoff(userId, now), now),
        audit,
      );
    },
  };
}
