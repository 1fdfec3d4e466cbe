/**
 * The developer portal's tables on SQLite (docs/portal.md): accounts and their states,
 * one-time codes, sessions and the mail outbox. A migration step of its own, appended to
 * MIGRATIONS (migrations.ts). Codes and session ids are stored only as SHA-256 digests; an
 * outbox message's body (which may hold a code) is cleared once it is sent.
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
