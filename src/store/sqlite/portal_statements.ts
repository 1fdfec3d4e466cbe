/**
 * The prepared statements of the portal's accounts, their users and codes on SQLite, for the
 * portal group (portal.ts). Each says whether it keeps grants (see connection.ts).
 *
 * @module
 */
import type { Connection } from "./connection.ts";
import { createUserCheck } from "./user_check.ts";

/** The statements of accounts, their users and codes. */
export type AccountStatements = ReturnType<typeof prepareAccountStatements>;

export function prepareAccountStatements(conn: Connection) {
  const { sql } = conn;
  return {
    accountFind: sql("SELECT * FROM portal_accounts WHERE user_id = :user_id"),
    // A write keyed by a user refuses one deleted meanwhile first (user_check.ts): the
    // portal's tables' foreign keys refuse a code, a session or an account, but not the audit
    // row naming the address nor the mail queued to it written beside them.
    requireUser: createUserCheck(conn),
    // By the accounts' index on (state, created_at).
    usersInState: sql(
      `SELECT u.*, a.user_id AS a_user_id, a.state AS a_state, a.created_at AS a_created_at,
         a.user_held AS a_user_held
       FROM portal_accounts a JOIN users u ON u.id = a.user_id
       WHERE a.state = :state ORDER BY a.created_at, a.user_id`,
    ),
    // Keeps grants: a new user has no tokens, and is disabled until active.
    userInsert: sql(
      `INSERT INTO users (email, password_hash, token_timeout_seconds, disabled, created_at,
         updated_at)
       VALUES (:email, :password_hash, :timeout, :disabled, :now, :now) RETURNING *`,
      "keeps-grants",
    ),
    accountInsert: sql(
      `INSERT INTO portal_accounts (user_id, state, created_at, updated_at, user_held)
       VALUES (:user_id, :state, :now, :now, :user_held)`,
      "keeps-grants",
    ),
    // An operator's user enrolled: active, never held.
    accountEnrol: sql(
      `INSERT INTO portal_accounts (user_id, state, created_at, updated_at, user_held)
       VALUES (:user_id, 'active', :now, :now, 0) ON CONFLICT (user_id) DO NOTHING`,
      "keeps-grants",
    ),
    // Activation ends the hold; the hold is read first (userEnable).
    accountSetState: sql(
      `UPDATE portal_accounts SET state = :state, updated_at = :now,
         user_held = CASE WHEN :state = 'active' THEN 0 ELSE user_held END
       WHERE user_id = :user_id`,
      "keeps-grants",
    ),
    // Only a user the portal holds disabled: never an operator's disable (which ends the hold).
    userEnable: sql(
      `UPDATE users SET disabled = 0, updated_at = :now WHERE id = :id AND disabled = 1
         AND EXISTS (SELECT 1 FROM portal_accounts WHERE user_id = :id AND user_held = 1)`,
    ),
    userSetPassword: sql(
      "UPDATE users SET password_hash = :password_hash, updated_at = :now WHERE id = :id",
    ),
    // Keeps grants: a disabled user has none (an unverified sign-up's new password).
    userSetHeldPassword: sql(
      `UPDATE users SET password_hash = :password_hash, updated_at = :now
       WHERE id = :id AND disabled = 1`,
      "keeps-grants",
    ),
    codesEnd: sql(
      `UPDATE portal_codes SET used_at = :now
       WHERE user_id = :user_id AND purpose = :purpose AND used_at IS NULL`,
      "keeps-grants",
    ),
    codeInsert: sql(
      `INSERT INTO portal_codes (user_id, purpose, code_hash, created_at, expires_at, new_email,
         password_hash, network)
       VALUES (:user_id, :purpose, :code_hash, :now, :expires_at, :new_email, :password_hash,
         :network)`,
      "keeps-grants",
    ),
    // Ends the live codes of a purpose but the newest `keep` (a new candidate is added next).
    codesEndOldest: sql(
      `UPDATE portal_codes SET used_at = :now
       WHERE user_id = :user_id AND purpose = :purpose AND used_at IS NULL
         AND id NOT IN (SELECT id FROM portal_codes WHERE user_id = :user_id
           AND purpose = :purpose AND used_at IS NULL AND expires_at > :now
           ORDER BY id DESC LIMIT :keep)`,
      "keeps-grants",
    ),
    // The same, among the live codes of one client network.
    codesEndOldestOfNetwork: sql(
      `UPDATE portal_codes SET used_at = :now
       WHERE user_id = :user_id AND purpose = :purpose AND used_at IS NULL AND network = :network
         AND id NOT IN (SELECT id FROM portal_codes WHERE user_id = :user_id
           AND purpose = :purpose AND used_at IS NULL AND expires_at > :now
           AND network = :network ORDER BY id DESC LIMIT :keep)`,
      "keeps-grants",
    ),
    codesFind: sql(
      `SELECT * FROM portal_codes WHERE user_id = :user_id AND purpose = :purpose
         AND used_at IS NULL AND expires_at > :now ORDER BY id DESC`,
    ),
    codeFind: sql(
      `SELECT * FROM portal_codes WHERE user_id = :user_id AND purpose = :purpose
         AND used_at IS NULL AND expires_at > :now ORDER BY id DESC LIMIT 1`,
    ),
    codeAttempt: sql(
      "UPDATE portal_codes SET attempts = attempts + 1 WHERE id = :id RETURNING attempts",
      "keeps-grants",
    ),
    codeUse: sql(
      `UPDATE portal_codes SET used_at = :now WHERE id = :id AND used_at IS NULL
       RETURNING user_id, new_email, password_hash`,
      "keeps-grants",
    ),
    ...prepareUserRowStatements(conn),
  };
}

/** The statements that change or delete a portal user's other rows (e-mail, key labels, …). */
function prepareUserRowStatements({ sql }: Connection) {
  return {
    // Alters grants: a cached grant carries the e-mail.
    userSetEmail: sql("UPDATE users SET email = :email, updated_at = :now WHERE id = :id"),
    // Keeps grants: a label is in no grant.
    keySetLabel: sql("UPDATE api_keys SET label = :label WHERE id = :id", "keeps-grants"),
    // Deleted by user_deletion.ts, as deleteUser deletes a user.
    unverifiedFind: sql(
      `SELECT user_id AS id FROM portal_accounts
       WHERE state = 'pending_verification' AND created_at < :before
       ORDER BY created_at LIMIT :limit`,
    ),
  };
}
