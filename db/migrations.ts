/**
 * The database schema, as an ordered list of migrations.
 *
 * Migration N brings a database from `PRAGMA user_version` N-1 to N. They are
 * TypeScript strings rather than .sql files so that `deno compile` embeds them
 * and the binary needs nothing beside it. Never edit a migration that has
 * shipped: add the next one.
 *
 * Times are integer milliseconds since the Unix epoch (UTC). Secrets are
 * stored only as SHA-256 digests (`*_hash BLOB`) or, for passwords, as
 * argon2id PHC strings.
 *
 * @module
 */

/** One schema step. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "init",
    sql: `
CREATE TABLE users (
  id INTEGER PRIMARY KEY,
  email TEXT NOT NULL UNIQUE CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  password_hash TEXT NOT NULL,
  token_timeout_seconds INTEGER CHECK (token_timeout_seconds > 0),
  disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
  id INTEGER PRIMARY KEY,
  key_hash BLOB NOT NULL UNIQUE CHECK (length(key_hash) = 32),
  prefix TEXT NOT NULL,
  user_id INTEGER NOT NULL REFERENCES users (id),
  label TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
) STRICT;
CREATE INDEX api_keys_by_user ON api_keys (user_id);

CREATE TABLE tokens (
  id INTEGER PRIMARY KEY,
  token_hash BLOB NOT NULL UNIQUE CHECK (length(token_hash) = 32),
  user_id INTEGER NOT NULL REFERENCES users (id),
  api_key_id INTEGER NOT NULL REFERENCES api_keys (id),
  issued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL CHECK (expires_at > issued_at),
  revoked_at INTEGER
) STRICT;
CREATE INDEX tokens_by_user ON tokens (user_id, expires_at);
CREATE INDEX tokens_by_api_key ON tokens (api_key_id, expires_at);
CREATE INDEX tokens_by_expiry ON tokens (expires_at);
`,
  },
  {
    // Issue 7. Versions 2 and 3 belong to other changes; nothing here depends on them.
    version: 4,
    name: "introspect_keys",
    sql: `
ALTER TABLE api_keys ADD COLUMN introspect INTEGER NOT NULL DEFAULT 0 CHECK (introspect IN (0, 1));
`,
  },
];
