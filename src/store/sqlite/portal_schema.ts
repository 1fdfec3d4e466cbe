/**
 * The developer portal's tables on SQLite (docs/portal.md): accounts and their states,
 * one-time codes, sessions and the mail outbox. A migration step of its own, appended to
 * MIGRATIONS (migrations.ts). Codes and session ids are stored only as SHA-256 digests; an
 * outbox message's body (which may hold a code) is cleared once it is sent or given up.
 *
 * @module
 */

/** The portal's tables. */
export const PORTAL_SCHEMA_SQL = `
CREATE TABLE portal_accounts (
  user_id INTEGER PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  state TEXT NOT NULL CHECK (state IN ('pending_verification', 'pending_approval', 'active')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE portal_codes (
  id INTEGER PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  purpose TEXT NOT NULL CHECK (purpose IN ('verify', 'reset')),
  code_hash BLOB NOT NULL CHECK (length(code_hash) = 32),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  used_at INTEGER
) STRICT;
CREATE INDEX portal_codes_by_user ON portal_codes (user_id, purpose);
CREATE TABLE portal_sessions (
  id_hash BLOB PRIMARY KEY CHECK (length(id_hash) = 32),
  user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX portal_sessions_by_user ON portal_sessions (user_id);
CREATE INDEX portal_sessions_by_expiry ON portal_sessions (expires_at);
CREATE TABLE mail_outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  recipient TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  sent_at INTEGER,
  last_error TEXT
) STRICT;
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
`;

/**
 * Codes that change a signed-in user's e-mail (purpose `email`): each holds the new address
 * it was mailed to; the outbox's count of failed sends (metrics). SQLite cannot alter a CHECK, so the table is rebuilt (it has no
 * dependants); rows, ids and the index stay.
 */
export const PORTAL_EMAIL_CODES_SQL = `
CREATE TABLE portal_codes_next (
  id INTEGER PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  purpose TEXT NOT NULL CHECK (purpose IN ('verify', 'reset', 'email')),
  code_hash BLOB NOT NULL CHECK (length(code_hash) = 32),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  used_at INTEGER,
  new_email TEXT CHECK ((purpose = 'email') = (new_email IS NOT NULL))
) STRICT;
INSERT INTO portal_codes_next (id, user_id, purpose, code_hash, created_at, expires_at, attempts,
  used_at)
SELECT id, user_id, purpose, code_hash, created_at, expires_at, attempts, used_at FROM portal_codes;
DROP TABLE portal_codes;
ALTER TABLE portal_codes_next RENAME TO portal_codes;
CREATE INDEX portal_codes_by_user ON portal_codes (user_id, purpose);
CREATE INDEX portal_accounts_by_state ON portal_accounts (state, created_at);
ALTER TABLE mail_outbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
UPDATE mail_outbox SET failures = attempts - (sent_at IS NOT NULL) WHERE attempts > 0;
`;

/**
 * Whether an account's user row is disabled only because the account is not active yet
 * (`user_held`): activation enables the user only then. An operator's disable or enable ends
 * the hold, so activation never clears an operator's disable. Accounts waiting with a disabled
 * user are taken as held (before this step, nothing told the two apart).
 */
export const PORTAL_USER_HOLD_SQL = `
ALTER TABLE portal_accounts ADD COLUMN user_held INTEGER NOT NULL DEFAULT 0
  CHECK (user_held IN (0, 1));
UPDATE portal_accounts SET user_held = 1
WHERE state <> 'active' AND user_id IN (SELECT id FROM users WHERE disabled = 1);
`;

/**
 * Portal throttles: each verification code keeps the client network of the sign-up that made
 * it, so that a network's sign-ups end only its own candidates (docs/portal.md).
 */
export const PORTAL_CODE_NETWORK_SQL = `
ALTER TABLE portal_codes ADD COLUMN network TEXT;
`;

/**
 * Portal safety: each verification code holds the password hash of the sign-up that created
 * it (a later sign-up adds a candidate instead of replacing the owner's password and code);
 * and a deleted account's earlier audit rows may be made anonymous (the one exception to the
 * append-only log): only inside a transaction that first writes a row to `audit_redact`, and
 * only `subject` and `detail` may change.
 */
export const PORTAL_SAFETY_SQL = `
ALTER TABLE portal_codes ADD COLUMN password_hash TEXT;
CREATE TABLE audit_redact (user_ref TEXT NOT NULL) STRICT;
DROP TRIGGER audit_log_no_update;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
WHEN NOT EXISTS (SELECT 1 FROM audit_redact WHERE user_ref = NEW.subject)
  OR NEW.id <> OLD.id OR NEW.at <> OLD.at OR NEW.actor <> OLD.actor OR NEW.action <> OLD.action
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
`;

/**
 * The append-only exception tied to the deleting transaction (replacing `audit_redact`, which
 * any connection could fill): an update passes only while `keygate_audit_redact()` names a
 * `user:deleted:…` id, which only the store's own connection defines, and only inside the
 * delete's write (audit_anonymize.ts); other connections lack the function, so their updates
 * fail. Even then only `subject` and `detail` may change: a `user:` subject (not already a
 * deleted one) may become that id, and a detail value holding an `@` may become that id; keys,
 * other values and every other column stay.
 */
export const PORTAL_REDACT_SQL = `
DROP TRIGGER audit_log_no_update;
DROP TABLE audit_redact;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
WHEN NOT (
  coalesce(keygate_audit_redact() LIKE 'user:deleted:_%', 0)
  AND NEW.id = OLD.id AND NEW.at = OLD.at AND NEW.actor = OLD.actor AND NEW.action = OLD.action
  AND (NEW.subject = OLD.subject OR (OLD.subject LIKE 'user:%'
    AND OLD.subject NOT LIKE 'user:deleted:%' AND NEW.subject = keygate_audit_redact()))
  AND json_valid(NEW.detail)
  AND (SELECT count(*) FROM json_each(NEW.detail)) = (SELECT count(*) FROM json_each(OLD.detail))
  AND NOT EXISTS (
    SELECT 1 FROM json_each(OLD.detail) AS o LEFT JOIN json_each(NEW.detail) AS n ON n.key = o.key
    WHERE n.key IS NULL OR NOT (
      (o.type = n.type AND CASE WHEN o.type IN ('object', 'array')
        THEN json(o.value) = json(n.value) ELSE o.atom IS n.atom END)
      OR (o.type = 'text' AND instr(o.atom, '@') > 0 AND n.type = 'text'
        AND n.atom = keygate_audit_redact())))
)
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
`;
