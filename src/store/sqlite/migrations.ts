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
import {
  describeSkippedEmails,
  planCanonicalEmails,
  type StoredEmail,
} from "../canonical_emails.ts";
import {
  PORTAL_CODE_NETWORK_SQL,
  PORTAL_EMAIL_CODES_SQL,
  PORTAL_REDACT_SQL,
  PORTAL_SAFETY_SQL,
  PORTAL_SCHEMA_SQL,
  PORTAL_USER_HOLD_SQL,
} from "./portal_schema.ts";
import type { Migration } from "./migrate.ts";

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
    version: 2,
    name: "login_failures",
    // Brute-force counters (src/throttle.ts). `subject` is "key:<api_key_id>" for the
    // (API key, e-mail) counter, which is only kept when the key belongs to that
    // e-mail's user, or "client:<address>" (an IPv6 address reduced to its /64) for
    // the client counter. E-mails never appear here, so unknown e-mails create no rows.
    sql: `
CREATE TABLE login_failures (
  subject TEXT PRIMARY KEY CHECK (length(subject) BETWEEN 1 AND 128),
  failures INTEGER NOT NULL CHECK (failures > 0),
  last_failure_at INTEGER NOT NULL,
  blocked_until INTEGER NOT NULL,
  forget_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX login_failures_by_forget_at ON login_failures (forget_at);
`,
  },
  {
    version: 3,
    name: "key and token lifecycle, audit log",
    sql: `
-- Key lifecycle. expires_at: the key stops working at this instant (set at
-- creation with --expires, or shortened by a rotation's grace period).
-- disabled_at: suspended until enabled again. replaced_by: the successor
-- issued by a rotation. last_used_*: written in batches by the usage flusher.
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN disabled_at INTEGER;
ALTER TABLE api_keys ADD COLUMN replaced_by INTEGER REFERENCES api_keys (id);
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
ALTER TABLE api_keys ADD COLUMN last_used_from TEXT;
ALTER TABLE api_keys ADD COLUMN use_count INTEGER NOT NULL DEFAULT 0 CHECK (use_count >= 0);

-- Per-user revocation cutoff: a token is valid only if issued_at >= tokens_valid_from.
ALTER TABLE users ADD COLUMN tokens_valid_from INTEGER NOT NULL DEFAULT 0;

-- Append-only audit trail of admin changes and security events. No secrets:
-- subjects are e-mails of known users, key ids and token ids.
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  subject TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail))
) STRICT;
CREATE INDEX audit_log_by_time ON audit_log (at);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
`,
  },
  {
    version: 4,
    name: "introspect_keys",
    sql: `
ALTER TABLE api_keys ADD COLUMN introspect INTEGER NOT NULL DEFAULT 0 CHECK (introspect IN (0, 1));
`,
  },
  {
    version: 5,
    name: "operators",
    // Operators of the admin API (src/auth/operators.ts): a name, a role and the
    // SHA-256 of their token. A name is unique among operators not revoked, so a
    // revoked name can be given to a new operator. The last index pages a user's tokens.
    sql: `
CREATE TABLE operators (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  role TEXT NOT NULL CHECK (role IN ('read', 'write')),
  token_hash BLOB NOT NULL UNIQUE CHECK (length(token_hash) = 32),
  prefix TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
) STRICT;
CREATE UNIQUE INDEX operators_live_name ON operators (name) WHERE revoked_at IS NULL;
CREATE INDEX tokens_by_user_id ON tokens (user_id, id);
CREATE INDEX audit_log_by_actor ON audit_log (actor, id);
CREATE INDEX audit_log_by_subject ON audit_log (subject, id);
`,
  },
  {
    version: 6,
    name: "canonical_emails",
    // E-mails written before they were stored in NFC (src/store/canonical_emails.ts).
    sql: "-- e-mails in NFC and lower case, in JavaScript",
    run(db) {
      const rows = db.prepare("SELECT id, email FROM users").all() as unknown as StoredEmail[];
      const { updates, skipped } = planCanonicalEmails(rows);
      const update = db.prepare("UPDATE users SET email = :email WHERE id = :id");
      for (const row of updates) update.run({ id: row.id, email: row.email });
      return skipped > 0 ? describeSkippedEmails(skipped) : undefined;
    },
  },
  {
    version: 7,
    name: "audit paging and retention",
    // Every audit page reads through an index in its own order, time then id, newest first
    // (src/store/sqlite/audit_search.ts): one per filter column, one for time alone; the
    // throttle's counters ever blocked are paged in theirs, the longest-blocked first (a
    // partial index: the readiness probe's rows, never blocked, do not grow it).
    // Retention (--audit-retention) deletes old rows only inside a transaction that first
    // writes its cutoff to audit_prune, and only rows older than that cutoff; any other
    // delete, and every update, is still refused.
    sql: `
DROP INDEX audit_log_by_time;
DROP INDEX audit_log_by_actor;
DROP INDEX audit_log_by_subject;
CREATE INDEX audit_log_by_at ON audit_log (at, id);
CREATE INDEX audit_log_by_actor ON audit_log (actor, at, id);
CREATE INDEX audit_log_by_subject ON audit_log (subject, at, id);
CREATE INDEX audit_log_by_action ON audit_log (action, at, id);
CREATE INDEX login_failures_by_blocked ON login_failures (blocked_until DESC, subject)
WHERE blocked_until > 0;
CREATE TABLE audit_prune (before_at INTEGER NOT NULL) STRICT;
DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN NOT EXISTS (SELECT 1 FROM audit_prune WHERE OLD.at < before_at)
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
`,
  },
  {
    version: 8,
    name: "grant change record",
    // What each grant-ending change touched, written by triggers in the change's own
    // transaction, whoever makes it (keygate, the admin CLI, a hand-made SQL statement): one
    // row per token, key or user row updated in a column a grant depends on, or deleted.
    // Positions are commit-ordered (one writer at a time) and gap-free (AUTOINCREMENT's
    // counter rolls back with its transaction); `tag` tells a row from one a restored backup
    // put at the same position. Stores read the rows after the position they have seen and
    // evict only what they touch (src/store/sqlite/connection.ts); the record is pruned to a
    // bounded size. The first row, `all`, makes every running store drop its caches.
    sql: `
CREATE TABLE grant_changes (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  scope TEXT NOT NULL CHECK (scope IN ('token', 'key', 'user', 'all')),
  subject INTEGER,
  tag INTEGER NOT NULL
) STRICT;
CREATE TRIGGER grant_changes_token_update
AFTER UPDATE OF token_hash, user_id, api_key_id, issued_at, expires_at, revoked_at ON tokens
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES ('token', OLD.id, random() >> 12); END;
CREATE TRIGGER grant_changes_token_delete AFTER DELETE ON tokens
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES ('token', OLD.id, random() >> 12); END;
CREATE TRIGGER grant_changes_key_update
AFTER UPDATE OF key_hash, user_id, introspect, revoked_at, expires_at, disabled_at, replaced_by
ON api_keys
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES ('key', OLD.id, random() >> 12); END;
CREATE TRIGGER grant_changes_key_delete AFTER DELETE ON api_keys
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES ('key', OLD.id, random() >> 12); END;
CREATE TRIGGER grant_changes_user_update
AFTER UPDATE OF email, password_hash, token_timeout_seconds, disabled, tokens_valid_from ON users
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES ('user', OLD.id, random() >> 12); END;
CREATE TRIGGER grant_changes_user_delete AFTER DELETE ON users
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES ('user', OLD.id, random() >> 12); END;
INSERT INTO grant_changes (scope, subject, tag) VALUES ('all', NULL, random() >> 12);
`,
  },
  {
    // The developer portal (portal_schema.ts).
    version: 9,
    name: "portal",
    sql: PORTAL_SCHEMA_SQL,
  },
  {
    // The portal's e-mail change codes, and unverified sign-ups found by age (portal_schema.ts).
    version: 10,
    name: "portal e-mail change",
    sql: PORTAL_EMAIL_CODES_SQL,
  },
  {
    version: 11,
    name: "limits",
    // Rates and quotas (src/store/store_limits.ts): per API key, per user, or the default for
    // keys without their own (per kind). At most one limit per scope, subject, kind and period,
    // and one quota per subject. A key's or user's limits go with it. `limit_usage` is each
    // limit's counter for one subject (the key, or the user for a user's limit) in its current
    // window: units leased by servers (src/auth/limiter.ts). A change of a limit is recorded in
    // the grant change record (the key, the user, or all for the default), so that every server
    // reads the limits of the keys it touches again.
    sql: `
CREATE TABLE limits (
  id INTEGER PRIMARY KEY,
  scope TEXT NOT NULL CHECK (scope IN ('key', 'user', 'default')),
  api_key_id INTEGER REFERENCES api_keys (id) ON DELETE CASCADE,
  user_id INTEGER REFERENCES users (id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('rate', 'quota')),
  period TEXT NOT NULL CHECK (period IN ('second', 'minute', 'hour', 'day', 'month', 'none')),
  max INTEGER NOT NULL CHECK (max BETWEEN 0 AND 1000000000000),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CHECK ((scope = 'key') = (api_key_id IS NOT NULL) AND (scope = 'user') = (user_id IS NOT NULL)),
  CHECK (kind = 'quota' OR period IN ('second', 'minute', 'hour', 'day'))
) STRICT;
CREATE UNIQUE INDEX limits_by_subject ON limits (scope, coalesce(api_key_id, user_id, 0), kind, period);
CREATE UNIQUE INDEX limits_one_quota ON limits (scope, coalesce(api_key_id, user_id, 0))
WHERE kind = 'quota';
CREATE INDEX limits_by_key ON limits (api_key_id) WHERE api_key_id IS NOT NULL;
CREATE INDEX limits_by_user ON limits (user_id) WHERE user_id IS NOT NULL;
CREATE TABLE limit_usage (
  limit_id INTEGER NOT NULL REFERENCES limits (id) ON DELETE CASCADE,
  subject_id INTEGER NOT NULL,
  window_start INTEGER NOT NULL,
  used INTEGER NOT NULL CHECK (used >= 0),
  PRIMARY KEY (limit_id, subject_id)
) STRICT, WITHOUT ROWID;
CREATE TRIGGER grant_changes_limit_insert AFTER INSERT ON limits
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES
  (CASE NEW.scope WHEN 'default' THEN 'all' ELSE NEW.scope END,
   coalesce(NEW.api_key_id, NEW.user_id), random() >> 12); END;
CREATE TRIGGER grant_changes_limit_update AFTER UPDATE ON limits
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES
  (CASE NEW.scope WHEN 'default' THEN 'all' ELSE NEW.scope END,
   coalesce(NEW.api_key_id, NEW.user_id), random() >> 12); END;
CREATE TRIGGER grant_changes_limit_delete AFTER DELETE ON limits
BEGIN INSERT INTO grant_changes (scope, subject, tag) VALUES
  (CASE OLD.scope WHEN 'default' THEN 'all' ELSE OLD.scope END,
   coalesce(OLD.api_key_id, OLD.user_id), random() >> 12); END;
`,
  },
  {
    // Activation enables a portal user only while the portal holds it disabled; an operator's
    // disable stays (portal_schema.ts).
    version: 12,
    name: "portal user hold",
    sql: PORTAL_USER_HOLD_SQL,
  },
  {
    // Verification codes with their own pending password, and a deleted account's audit rows
    // made anonymous (portal_schema.ts).
    version: 13,
    name: "portal safety",
    sql: PORTAL_SAFETY_SQL,
  },
  {
    // The audit log's one rewrite tied to the deleting transaction, and limited to making
    // addresses anonymous (portal_schema.ts).
    version: 14,
    name: "portal audit redact",
    sql: PORTAL_REDACT_SQL,
  },
  {
    // Verification codes keep their sign-up's client network (portal_schema.ts).
    version: 15,
    name: "portal code network",
    sql: PORTAL_CODE_NETWORK_SQL,
  },
  {
    // A deletion's anonymization reads the rows of a few actions in the deleted user's id range
    // (audit_anonymize.ts): by (action, id) the range narrows the read, where (action, at, id)
    // (the audit search's, kept) made it read every row of those actions.
    version: 16,
    name: "audit action ids",
    sql: "CREATE INDEX audit_log_by_action_id ON audit_log (action, id);",
  },
  {
    // A limit's counter also counts the units leased ahead from the window that starts at
    // next_start (src/store/limit_lease.ts): they become that window's `used` when a lease moves
    // to it, or count in it when an older instance moved the counter there without them.
    version: 17,
    name: "limit lease ahead",
    sql:
      `ALTER TABLE limit_usage ADD COLUMN next_used INTEGER NOT NULL DEFAULT 0 CHECK (next_used >= 0);
ALTER TABLE limit_usage ADD COLUMN next_start INTEGER NOT NULL DEFAULT 0;`,
  },
  {
    // The janitor finds the tokens past retention through indexes (ENDED_TOKEN_IDS in rules.ts),
    // where it walked every token row: the revoked ones (only they are in the first index) and
    // those issued before their user's cutoff.
    version: 18,
    name: "janitor indexes",
    sql: `CREATE INDEX tokens_by_revocation ON tokens (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX tokens_by_user_issue ON tokens (user_id, issued_at);`,
  },
  {
    // The janitor's timed sweeps look only at the keys and users that ended since its last sweep
    // that found nothing (ENDED_TOKEN_IDS in rules.ts), where every batch read both tables.
    version: 19,
    name: "janitor key and user indexes",
    sql: `CREATE INDEX api_keys_by_revocation ON api_keys (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX api_keys_by_expiry ON api_keys (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX users_by_cutoff ON users (updated_at) WHERE tokens_valid_from > 0;`,
  },
];
