/**
 * The SQLite store: the only module that speaks SQL.
 *
 * {@link openStore} applies pragmas and migrations, prepares every statement
 * once, and returns synchronous domain functions. Writes that belong together
 * run in one `BEGIN IMMEDIATE` transaction; nothing in here awaits, so a
 * transaction can never span an `await`.
 *
 * @module
 */
import { existsSync } from "node:fs";
import {
  backup,
  DatabaseSync,
  type SQLInputValue,
  type StatementResultingChanges,
  type StatementSync,
} from "node:sqlite";
import { type Migration, MIGRATIONS } from "./migrations.ts";
import { type CommitCounter, openCommitCounter } from "./wal_index.ts";

/** Bytes of the database file that reads go through a memory map for. */
export const MMAP_BYTES = 256 * 1024 * 1024;

/** How long a statement waits for another connection's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 2000;

/** Options for {@link openStore}. */
export interface StoreOptions {
  /** How long a write waits for another connection's lock. Default {@link BUSY_TIMEOUT_MS}. */
  busyTimeoutMs?: number;
  /**
   * Caps the database at this many pages (`PRAGMA max_page_count`), after
   * which writes fail as on a full disk. Default: SQLite's own limit.
   */
  maxPageCount?: number;
  /**
   * `"full"` (the default): every commit is synced to disk before it
   * returns (`PRAGMA synchronous = FULL`). `"grants"`, for the server: only
   * commits that can end a grant (revocations, key and user changes; see
   * {@link Store.readGrantWrites}) are synced before they return; others (a
   * new token and its audit row, a key's last use, throttle counters) reach
   * the disk with the next synced commit or checkpoint, so a power cut (not
   * a crash of keygate) can lose the last of them. A login then costs no
   * fsync on the thread that serves secure requests.
   */
  durability?: "full" | "grants";
}

/** A brute-force counter row (see src/throttle.ts). */
export interface LoginFailures {
  /** `key:<api key id>` or `client:<address>`; never an e-mail. */
  subject: string;
  failures: number;
  lastFailureAt: number;
  /** Until when logins for this subject get 429; 0 when not blocked. */
  blockedUntil: number;
  /** When the row stops counting and may be deleted. */
  forgetAt: number;
}

/** Pages copied per step of a backup; between steps other connections may write. */
export const BACKUP_PAGES_PER_STEP = 1000;

/**
 * The one rule for "key `k` of user `u` is usable at `:now`": not revoked,
 * disabled or expired, and its user enabled. SQL fragment over aliases `k`, `u`.
 */
const KEY_USABLE = `k.revoked_at IS NULL AND k.disabled_at IS NULL
  AND (k.expires_at IS NULL OR k.expires_at > :now) AND u.disabled = 0`;

/**
 * The one rule for "token `t` is valid at `:now`, its own expiry aside": its
 * key is usable, it is not revoked, and it was issued at or after its user's
 * cutoff. The token's expiry is left to the caller, which tells an expired
 * token (401 `token_expired`) from an invalid one. Aliases `t`, `k`, `u`.
 */
const TOKEN_VALID = `t.revoked_at IS NULL AND t.issued_at >= u.tokens_valid_from
  AND ${KEY_USABLE}`;

/** {@link TOKEN_VALID} and not expired at `:now`: a live token. */
const TOKEN_LIVE = `${TOKEN_VALID} AND t.expires_at > :now`;

/**
 * When token `t` stopped working for good (aliases `t`, `k`, `u`): the
 * earliest of its expiry, its revocation, its key's expiry or revocation, and,
 * for a token issued before its user's cutoff, the user's `updated_at` (set
 * when the cutoff was raised, and only ever later: never before the token
 * stopped, so retention is never cut short). A disabled key or user is not an
 * end: it can be enabled again (disabling a user also moves the cutoff, which
 * is). Rows whose end lies at or before `:cutoff` may be deleted; the
 * janitor's retention counts from this instant.
 */
const TOKEN_ENDED_AT = `min(t.expires_at,
  coalesce(t.revoked_at, t.expires_at),
  coalesce(k.expires_at, t.expires_at),
  coalesce(k.revoked_at, t.expires_at),
  CASE WHEN t.issued_at < u.tokens_valid_from THEN u.updated_at ELSE t.expires_at END)`;

/** Token row ids per transaction when deleting ended tokens (janitor and `token purge`). */
export const PURGE_BATCH_ROWS = 500;

/** A registered user. */
export interface User {
  id: number;
  email: string;
  passwordHash: string;
  /** Token lifetime in seconds, or `null` for the server's default. */
  tokenTimeoutSeconds: number | null;
  disabled: boolean;
  createdAt: number;
  updatedAt: number;
  /** Tokens issued before this instant are invalid (revoke-before cutoff). */
  tokensValidFrom: number;
}

/** An API key, without the key itself (only its digest is stored). */
export interface ApiKey {
  id: number;
  userId: number;
  prefix: string;
  label: string;
  createdAt: number;
  revokedAt: number | null;
  /** The key stops working at this instant; `null` for never. */
  expiresAt: number | null;
  disabledAt: number | null;
  /** Id of the successor a rotation issued. */
  replacedBy: number | null;
  lastUsedAt: number | null;
  lastUsedFrom: string | null;
  useCount: number;
  /** Whether this key belongs to a resource server that may introspect any token. */
  introspect: boolean;
}

/** Uses of one key since the last flush, accumulated in memory. */
export interface KeyUsage {
  apiKeyId: number;
  /** Time of the latest use. */
  lastUsedAt: number;
  /** Client address of the latest use. */
  lastUsedFrom: string;
  count: number;
}

/** One row of the append-only audit log. */
export interface AuditEntry {
  at: number;
  /** `cli:<user>`, `api_key:<id>` or `anonymous`. */
  actor: string;
  /** A stable word such as `user.added` or `token.issued`. */
  action: string;
  /** What the action was about: `user:<email>`, `api_key:<id>`, ... */
  subject: string;
  /** Extra facts, never secrets. */
  detail?: Record<string, string | number | null>;
}

/** An audit row as stored. */
export interface AuditRecord extends Required<AuditEntry> {
  id: number;
}

/** An API key with its owner's e-mail and state, for listings. */
export interface ApiKeyListing extends ApiKey {
  email: string;
  /** Whether the key's user is disabled (the key then does not authenticate). */
  userDisabled: boolean;
}

/** A live (not revoked) token found by its digest, joined with its user and key. */
export interface TokenGrant {
  tokenId: number;
  userId: number;
  email: string;
  apiKeyId: number;
  issuedAt: number;
  /** The earlier of the token's and its key's expiry. */
  expiresAt: number;
  /** When the key stops working, if it expires (the lookup already refused an expired key). */
  keyExpiresAt: number | null;
}

/** Who holds a live API key: the key's id and its enabled user. */
export interface KeyHolder {
  apiKeyId: number;
  userId: number;
  email: string;
  /** Whether the key may introspect tokens (a resource-server key). */
  introspect: boolean;
}

/** A token found by its digest, whatever its state, for introspection. */
export interface TokenStatus {
  tokenId: number;
  userId: number;
  email: string;
  apiKeyId: number;
  issuedAt: number;
  expiresAt: number;
  /** False once the token or its key is revoked, or its user disabled. Expiry is the caller's check. */
  live: boolean;
}

/** What {@link Store.issueToken} needs. */
export interface NewToken {
  tokenHash: Uint8Array;
  userId: number;
  apiKeyId: number;
  issuedAt: number;
  expiresAt: number;
  /** Live tokens allowed per user and key; the oldest beyond it are revoked. */
  maxLiveTokens: number;
}

/** The store's domain operations. All are synchronous. */
export type Store = ReturnType<typeof createStore>;

type Row = Record<string, SQLInputValue>;

function toUser(row: Row): User {
  return {
    id: row.id as number,
    email: row.email as string,
    passwordHash: row.password_hash as string,
    tokenTimeoutSeconds: row.token_timeout_seconds as number | null,
    disabled: row.disabled === 1,
    createdAt: row.created_at as number,
    updatedAt: row.updated_at as number,
    tokensValidFrom: row.tokens_valid_from as number,
  };
}

function toApiKey(row: Row): ApiKey {
  return {
    id: row.id as number,
    userId: row.user_id as number,
    prefix: row.prefix as string,
    label: row.label as string,
    createdAt: row.created_at as number,
    revokedAt: row.revoked_at as number | null,
    expiresAt: row.expires_at as number | null,
    disabledAt: row.disabled_at as number | null,
    replacedBy: row.replaced_by as number | null,
    lastUsedAt: row.last_used_at as number | null,
    lastUsedFrom: row.last_used_from as string | null,
    useCount: row.use_count as number,
    introspect: row.introspect === 1,
  };
}

/** The facts of a token row joined with its user, as both token lookups return them. */
function toTokenFacts(row: Row): Omit<TokenStatus, "live"> {
  return {
    tokenId: row.token_id as number,
    userId: row.user_id as number,
    email: row.email as string,
    apiKeyId: row.api_key_id as number,
    issuedAt: row.issued_at as number,
    expiresAt: row.expires_at as number,
  };
}

/**
 * Opens (creating if needed) the database at `path`, applies pragmas and
 * pending migrations, and returns the store.
 */
export function openStore(path: string, options: StoreOptions = {}): Store {
  const busyTimeoutMs = options.busyTimeoutMs ?? BUSY_TIMEOUT_MS;
  if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new RangeError(`Invalid busyTimeoutMs "${busyTimeoutMs}": expected a whole number`);
  }
  const db = new DatabaseSync(path, { timeout: busyTimeoutMs });
  try {
    db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    if (path !== ":memory:") db.exec("PRAGMA journal_mode = WAL");
    const durability = options.durability ?? "full";
    db.exec(
      `PRAGMA synchronous = ${durability === "full" || path === ":memory:" ? "FULL" : "NORMAL"}`,
    );
    db.exec("PRAGMA foreign_keys = ON");
    // Read pages through a memory map: token lookups in a large table cost no read()
    // system call, and the pages live in the OS page cache rather than our heap.
    db.exec(`PRAGMA mmap_size = ${MMAP_BYTES}`);
    migrate(db, MIGRATIONS);
    if (options.maxPageCount !== undefined) {
      if (!Number.isSafeInteger(options.maxPageCount) || options.maxPageCount < 1) {
        throw new RangeError(`Invalid maxPageCount "${options.maxPageCount}"`);
      }
      db.exec(`PRAGMA max_page_count = ${options.maxPageCount}`);
    }
    // WAL mode: the commit frames are in the -wal file, and syncing it makes them durable.
    // SQLite keeps -wal and -shm beside the file a symbolic link points to.
    const syncWal = durability === "grants" && path !== ":memory:"
      ? openWalSync(Deno.realPathSync(path))
      : undefined;
    return createStore(db, path, busyTimeoutMs, openCommitCounter(path), syncWal);
  } catch (error) {
    db.close();
    throw error;
  }
}

/**
 * Opens the database file at `path` read-only and returns the problems
 * `PRAGMA integrity_check` finds (empty when sound) and its row counts; for
 * validating a backup without touching it.
 */
export function inspectDatabaseFile(
  path: string,
): { problems: string[]; userVersion: number; counts: Record<string, number> } {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const problems = (db.prepare("PRAGMA integrity_check").all() as { integrity_check: string }[])
      .map((row) => row.integrity_check)
      .filter((text) => text !== "ok");
    const { user_version } = db.prepare("PRAGMA user_version").get() as { user_version: number };
    const counts: Record<string, number> = {};
    for (const table of ["users", "api_keys", "tokens"]) {
      counts[table] = (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    }
    return { problems, userVersion: user_version, counts };
  } finally {
    db.close();
  }
}

/** Applies the migrations newer than `PRAGMA user_version`, each in its own transaction. */
export function migrate(db: DatabaseSync, migrations: readonly Migration[]): void {
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new Error(
        `Migration ${migration.name} is numbered ${migration.version}, not ${index + 1}`,
      );
    }
  });
  for (const migration of migrations) {
    db.exec("BEGIN IMMEDIATE");
    try {
      const { user_version } = db.prepare("PRAGMA user_version").get() as { user_version: number };
      if (user_version > migrations.length) {
        throw new Error(
          `Database schema version ${user_version} is newer than this keygate knows (${migrations.length}): upgrade keygate`,
        );
      }
      if (user_version < migration.version) {
        db.exec(migration.sql);
        db.exec(`PRAGMA user_version = ${migration.version}`);
      }
      db.exec("COMMIT");
    } catch (error) {
      db.exec("ROLLBACK");
      throw error;
    }
  }
}

/** What the store uses of a prepared statement. */
type Statement = Pick<StatementSync, "run" | "get" | "all">;

/** Statements that write (and so may end a grant, unless declared otherwise). */
const WRITES = /^\s*(INSERT|UPDATE|DELETE|REPLACE|WITH)\b/i;

/** Syncs a database's WAL file to disk, for {@link StoreOptions.durability} `"grants"`. */
interface WalSync {
  sync(): void;
  close(): void;
}

function openWalSync(path: string): WalSync {
  // The -wal file exists once the connection has read in WAL mode (the migrations did).
  // SQLite holds no POSIX locks on it, so this descriptor can be closed at any time.
  const file = Deno.openSync(`${path}-wal`, { read: true });
  return { sync: () => file.syncDataSync(), close: () => file.close() };
}

function createStore(
  db: DatabaseSync,
  path: string,
  busyTimeoutMs: number,
  commits: CommitCounter,
  syncWal: WalSync | undefined,
) {
  /** Writes through this connection that may have ended or changed a token grant. */
  let grantWrites = 0;

  let walSyncs = 0;

  /** Makes what has committed durable (see StoreOptions.durability `"grants"`). */
  function syncCommitted(): void {
    if (syncWal === undefined) return;
    syncWal.sync();
    walSyncs++;
  }

  /** After a write that can end a grant commits: make it durable (see StoreOptions.durability). */
  function grantWritten(): void {
    grantWrites++;
    if (!db.isTransaction) syncCommitted(); // autocommit: it has committed; else see transaction()
  }

  /**
   * Prepares a statement. A write counts in {@link Store.readGrantWrites}
   * whenever it changes a row, unless it is declared `"keeps-grants"`: it
   * cannot end or change any live token grant (see {@link Store.findTokenGrant}).
   * Writes are counted by default, so a new one cannot be forgotten.
   */
  function sql(text: string, effect?: "keeps-grants"): Statement {
    const statement = db.prepare(text);
    if (effect === "keeps-grants" || !WRITES.test(text)) return statement;
    // The three methods take the same parameters as the statement's own (named or positional).
    const counted = {
      run(...args: unknown[]) {
        const result: StatementResultingChanges = Reflect.apply(statement.run, statement, args);
        if (Number(result.changes) > 0) grantWritten();
        return result;
      },
      get(...args: unknown[]) {
        const row = Reflect.apply(statement.get, statement, args);
        if (row !== undefined) grantWritten(); // RETURNING: a row came back, so one changed
        return row;
      },
      all(...args: unknown[]) {
        const rows: unknown[] = Reflect.apply(statement.all, statement, args);
        if (rows.length > 0) grantWritten();
        return rows;
      },
    };
    return counted as unknown as Statement;
  }

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

  // Keeps grants: a new key has no tokens yet.
  const keyInsert = sql(
    `INSERT INTO api_keys (key_hash, prefix, user_id, label, introspect, created_at, expires_at)
     VALUES (:key_hash, :prefix, :user_id, :label, :introspect, :now, :expires_at) RETURNING *`,
    "keeps-grants",
  );
  const keyByHash = sql("SELECT * FROM api_keys WHERE key_hash = :key_hash");
  const keyById = sql("SELECT * FROM api_keys WHERE id = :id");
  const keysAll = sql(
    `SELECT k.*, u.email, u.disabled AS user_disabled FROM api_keys k
     JOIN users u ON u.id = k.user_id ORDER BY u.email, k.id`,
  );
  const keysOfUser = sql(
    `SELECT k.*, u.email, u.disabled AS user_disabled FROM api_keys k
     JOIN users u ON u.id = k.user_id WHERE k.user_id = :user_id ORDER BY k.id`,
  );
  const keyRevoke = sql(
    "UPDATE api_keys SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL",
  );

  // Keeps grants: a new token ends no other (the cap is applied separately).
  const tokenInsert = sql(
    `INSERT INTO tokens (token_hash, user_id, api_key_id, issued_at, expires_at)
     VALUES (:token_hash, :user_id, :api_key_id, :issued_at, :expires_at)`,
    "keeps-grants",
  );
  // Keeps the newest `keep` live tokens of a user and key, revoking the rest.
  const tokenRevokeBeyondCap = sql(
    `UPDATE tokens SET revoked_at = :now WHERE id IN (
       SELECT id FROM tokens
       WHERE user_id = :user_id AND api_key_id = :api_key_id
         AND revoked_at IS NULL AND expires_at > :now
       ORDER BY issued_at DESC, id DESC LIMIT -1 OFFSET :keep)`,
  );
  // The secure path's one statement: token, key, user and their states in one indexed read.
  // A token's effective expiry is capped by its key's (a rotated or expiring key takes its
  // tokens with it); tokens issued before the user's cutoff are invalid.
  const tokenGrant = sql(
    `SELECT t.id AS token_id, t.user_id, u.email, t.api_key_id, t.issued_at,
       min(t.expires_at, coalesce(k.expires_at, t.expires_at)) AS expires_at,
       k.expires_at AS key_expires_at
     FROM tokens t
     JOIN api_keys k ON k.id = t.api_key_id
     JOIN users u ON u.id = t.user_id
     WHERE t.token_hash = :token_hash AND k.key_hash = :key_hash AND ${TOKEN_VALID}`,
  );
  const tokenRevoke = sql(
    "UPDATE tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL",
  );
  const dataVersion = db.prepare("PRAGMA data_version");
  const tokensRevokeOfKey = sql(
    `UPDATE tokens SET revoked_at = :now
     WHERE api_key_id = :api_key_id AND revoked_at IS NULL AND expires_at > :now
       AND issued_at >= (SELECT u.tokens_valid_from FROM users u WHERE u.id = tokens.user_id)`,
  );
  // Moves the user's cutoff forward only: an earlier cutoff must never revive tokens.
  const userRaiseCutoff = sql(
    `UPDATE users SET tokens_valid_from = max(tokens_valid_from, :cutoff), updated_at = :now
     WHERE id = :id`,
  );
  const tokensLiveBefore = sql(
    `SELECT count(*) AS n FROM tokens
     WHERE user_id = :user_id AND revoked_at IS NULL AND expires_at > :now
       AND issued_at >= :from AND issued_at < :cutoff`,
  );
  const keySetDisabled = sql(
    "UPDATE api_keys SET disabled_at = :disabled_at WHERE id = :id AND revoked_at IS NULL",
  );
  const keySetReplaced = sql(
    `UPDATE api_keys SET replaced_by = :replaced_by,
       expires_at = min(coalesce(expires_at, :expires_at), :expires_at)
     WHERE id = :id AND replaced_by IS NULL AND revoked_at IS NULL`,
  );
  // Keeps grants: last use is bookkeeping, not part of a grant.
  const keyAddUsage = sql(
    `UPDATE api_keys SET
       last_used_from = CASE WHEN :at >= coalesce(last_used_at, 0) THEN :address
                        ELSE last_used_from END,
       last_used_at = max(coalesce(last_used_at, 0), :at),
       use_count = use_count + :count
     WHERE id = :id`,
    "keeps-grants",
  );
  // Keeps grants: the audit table is not read by the gate.
  const auditInsert = sql(
    `INSERT INTO audit_log (at, actor, action, subject, detail)
     VALUES (:at, :actor, :action, :subject, :detail)`,
    "keeps-grants",
  );
  const auditSince = sql("SELECT * FROM audit_log WHERE at >= :since ORDER BY id");
  const totalChanges = sql("SELECT total_changes() AS n");
  const ping = sql("SELECT 1 AS ok");
  const tokensLive = sql(
    `SELECT count(*) AS n FROM tokens t
     JOIN api_keys k ON k.id = t.api_key_id
     JOIN users u ON u.id = t.user_id
     WHERE ${TOKEN_LIVE}`,
  );
  const tokenIdBounds = sql("SELECT min(id) AS first, max(id) AS last FROM tokens");
  // The janitor's batch: a range of at most :size row ids, so no statement holds the lock long.
  // A token ended (see TOKEN_ENDED_AT) at or before :cutoff.
  // Counts as a grant write although only ended tokens go: a cached grant of an expired token
  // answers `token_expired`, and must answer `invalid_token` once its row is gone.
  const tokensPurgeRange = sql(
    `DELETE FROM tokens WHERE id IN (
       SELECT t.id FROM tokens t
       JOIN api_keys k ON k.id = t.api_key_id
       JOIN users u ON u.id = t.user_id
       WHERE t.id > :after AND t.id <= :after + :size AND ${TOKEN_ENDED_AT} <= :cutoff)`,
  );
  const integrityCheck = sql("PRAGMA integrity_check");
  const foreignKeyCheck = sql("PRAGMA foreign_key_check");
  const counts = {
    users: sql("SELECT count(*) AS n FROM users"),
    api_keys: sql("SELECT count(*) AS n FROM api_keys"),
    tokens: sql("SELECT count(*) AS n FROM tokens"),
    login_failures: sql("SELECT count(*) AS n FROM login_failures"),
  };

  const failuresBySubject = sql(
    "SELECT * FROM login_failures WHERE subject IN (:a, :b) AND forget_at > :now",
  );
  // Keeps grants: throttle counters are not read by the gate.
  const failuresUpsert = sql(
    `INSERT INTO login_failures (subject, failures, last_failure_at, blocked_until, forget_at)
     VALUES (:subject, :failures, :last_failure_at, :blocked_until, :forget_at)
     ON CONFLICT (subject) DO UPDATE SET failures = excluded.failures,
       last_failure_at = excluded.last_failure_at, blocked_until = excluded.blocked_until,
       forget_at = excluded.forget_at`,
    "keeps-grants",
  );
  // Keeps grants: throttle counters are not read by the gate.
  const failuresDelete = sql("DELETE FROM login_failures WHERE subject = :subject", "keeps-grants");
  const failuresLive = sql(
    "SELECT * FROM login_failures WHERE forget_at > :now ORDER BY blocked_until DESC, subject",
  );
  // Bounded, so that pruning never holds the write lock for long.
  // Keeps grants: throttle counters are not read by the gate.
  const failuresPrune = sql(
    `DELETE FROM login_failures WHERE subject IN (
       SELECT subject FROM login_failures WHERE forget_at <= :now LIMIT 100)`,
    "keeps-grants",
  );

  function toLoginFailures(row: Row): LoginFailures {
    return {
      subject: row.subject as string,
      failures: row.failures as number,
      lastFailureAt: row.last_failure_at as number,
      blockedUntil: row.blocked_until as number,
      forgetAt: row.forget_at as number,
    };
  }

  function findLoginFailures(subjects: readonly string[], now: number): LoginFailures[] {
    if (subjects.length === 0) return [];
    if (subjects.length > 2) throw new RangeError("At most two subjects at once");
    const rows = failuresBySubject.all({ a: subjects[0], b: subjects.at(-1)!, now }) as Row[];
    return rows.map(toLoginFailures);
  }

  // The API-key gate, introspection and revocation. A key is usable while it is
  // not revoked, disabled or expired and its user is enabled; a token is live while
  // its key is usable, it is not revoked and was issued at or after its user's cutoff.
  const keyHolder = sql(
    `SELECT k.id AS api_key_id, k.user_id, u.email, k.introspect FROM api_keys k
     JOIN users u ON u.id = k.user_id
     WHERE k.key_hash = :key_hash AND ${KEY_USABLE}`,
  );
  const tokenStatus = sql(
    `SELECT t.id AS token_id, t.user_id, u.email, t.api_key_id, t.issued_at,
       min(t.expires_at, coalesce(k.expires_at, t.expires_at)) AS expires_at,
       (${TOKEN_VALID}) AS live
     FROM tokens t
     JOIN api_keys k ON k.id = t.api_key_id
     JOIN users u ON u.id = t.user_id
     WHERE t.token_hash = :token_hash`,
  );
  const tokenRevokeOfKey = sql(
    `UPDATE tokens SET revoked_at = :now
     WHERE token_hash = :token_hash AND api_key_id = :api_key_id AND revoked_at IS NULL
     RETURNING id`,
  );

  /**
   * Runs `fn` in a `BEGIN IMMEDIATE` transaction: committed if it returns,
   * rolled back if it throws. `fn` must be synchronous. Inside another
   * transaction, `fn` simply runs as part of it.
   */
  function transaction<T>(fn: () => T): T {
    // Nested calls join the outer transaction, so that a caller can add an audit row
    // to a store function's writes and have all of them commit or roll back together.
    if (db.isTransaction) return fn();
    db.exec("BEGIN IMMEDIATE");
    try {
      const before = grantWrites;
      const result = fn();
      db.exec("COMMIT");
      if (grantWrites !== before) syncCommitted();
      return result;
    } catch (error) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw error;
    }
  }

  /** The lowest and highest token row ids, or `undefined` when there are no tokens. */
  function tokenIdBoundsOf(): { first: number; last: number } | undefined {
    const row = tokenIdBounds.get() as { first: number | null; last: number | null };
    return row.first === null ? undefined : { first: row.first, last: row.last! };
  }

  function purgeRange(afterId: number, size: number, cutoff: number): number {
    return transaction(() =>
      Number(tokensPurgeRange.run({ after: afterId, size, cutoff }).changes)
    );
  }

  /** The cutoff for "everything issued up to now": strictly increasing, see README. */
  function nextCutoff(userId: number, now: number): number {
    const row = userById.get({ id: userId }) as Row | undefined;
    const current = (row?.tokens_valid_from as number | undefined) ?? 0;
    return Math.max(current + 1, now + 1);
  }

  function revokeTokensBefore(userId: number, cutoff: number, now: number): number {
    const row = userById.get({ id: userId }) as Row | undefined;
    const from = (row?.tokens_valid_from as number | undefined) ?? 0;
    const { n } = tokensLiveBefore.get({ user_id: userId, now, from, cutoff }) as { n: number };
    userRaiseCutoff.run({ id: userId, cutoff, now });
    return n;
  }

  function insertApiKey(
    key: {
      userId: number;
      keyHash: Uint8Array;
      prefix: string;
      label: string;
      expiresAt?: number | null;
      introspect?: boolean;
    },
    now: number,
  ): ApiKey {
    return toApiKey(keyInsert.get({
      key_hash: key.keyHash,
      prefix: key.prefix,
      user_id: key.userId,
      label: key.label,
      introspect: key.introspect ? 1 : 0,
      now,
      expires_at: key.expiresAt ?? null,
    }) as Row);
  }

  return {
    transaction,

    findUserByEmail(email: string): User | undefined {
      const row = userByEmail.get({ email }) as Row | undefined;
      return row && toUser(row);
    },

    findUserById(id: number): User | undefined {
      const row = userById.get({ id }) as Row | undefined;
      return row && toUser(row);
    },

    listUsers(): User[] {
      return (usersAll.all() as Row[]).map(toUser);
    },

    insertUser(
      user: { email: string; passwordHash: string; tokenTimeoutSeconds: number | null },
      now: number,
    ): User {
      return toUser(userInsert.get({
        email: user.email,
        password_hash: user.passwordHash,
        timeout: user.tokenTimeoutSeconds,
        now,
      }) as Row);
    },

    setUserTimeout(userId: number, tokenTimeoutSeconds: number | null, now: number): void {
      userSetTimeout.run({ id: userId, timeout: tokenTimeoutSeconds, now });
    },

    /**
     * Replaces the password hash and invalidates every token issued up to now
     * (the user's cutoff), in one transaction; returns how many live tokens that ended.
     */
    setUserPassword(userId: number, passwordHash: string, now: number): number {
      return transaction(() => {
        userSetPassword.run({ id: userId, password_hash: passwordHash, now });
        return revokeTokensBefore(userId, nextCutoff(userId, now), now);
      });
    },

    /** Disables (applying the token cutoff, in one transaction) or re-enables a user. */
    setUserDisabled(userId: number, disabled: boolean, now: number): number {
      return transaction(() => {
        userSetDisabled.run({ id: userId, disabled: disabled ? 1 : 0, now });
        return disabled ? revokeTokensBefore(userId, nextCutoff(userId, now), now) : 0;
      });
    },

    insertApiKey,

    findApiKeyByHash(keyHash: Uint8Array): ApiKey | undefined {
      const row = keyByHash.get({ key_hash: keyHash }) as Row | undefined;
      return row && toApiKey(row);
    },

    findApiKeyById(id: number): ApiKey | undefined {
      const row = keyById.get({ id }) as Row | undefined;
      return row && toApiKey(row);
    },

    listApiKeys(userId?: number): ApiKeyListing[] {
      const rows = userId === undefined ? keysAll.all() : keysOfUser.all({ user_id: userId });
      return (rows as Row[]).map((row) => ({
        ...toApiKey(row),
        email: row.email as string,
        userDisabled: row.user_disabled === 1,
      }));
    },

    /** Revokes a key and the live tokens issued with it; returns how many tokens. */
    revokeApiKey(id: number, now: number): number {
      return transaction(() => {
        keyRevoke.run({ id, now });
        return Number(tokensRevokeOfKey.run({ api_key_id: id, now }).changes);
      });
    },

    /**
     * Stores a new token and revokes the oldest live tokens of the same user
     * and key beyond `maxLiveTokens`, in one transaction; returns the token's id.
     */
    issueToken(token: NewToken): number {
      return transaction(() => {
        const { lastInsertRowid } = tokenInsert.run({
          token_hash: token.tokenHash,
          user_id: token.userId,
          api_key_id: token.apiKeyId,
          issued_at: token.issuedAt,
          expires_at: token.expiresAt,
        });
        tokenRevokeBeyondCap.run({
          user_id: token.userId,
          api_key_id: token.apiKeyId,
          now: token.issuedAt,
          keep: token.maxLiveTokens,
        });
        return Number(lastInsertRowid);
      });
    },

    /**
     * Finds the unrevoked token with this digest, issued with the key with
     * this digest, whose user is enabled, issued at or after the user's
     * cutoff, whose key is enabled and unexpired at `now`. The token's own
     * expiry (capped by the key's) is the caller's check.
     */
    findTokenGrant(
      tokenHash: Uint8Array,
      keyHash: Uint8Array,
      now: number,
    ): TokenGrant | undefined {
      const row = tokenGrant.get({ token_hash: tokenHash, key_hash: keyHash, now }) as
        | Row
        | undefined;
      if (!row) return undefined;
      return { ...toTokenFacts(row), keyExpiresAt: row.key_expires_at as number | null };
    },

    /**
     * Commits by any connection, read without a lock from the WAL index (see
     * src/wal_index.ts), or `undefined` where that is not possible. When it
     * has not moved, nothing has changed; when it has, ask
     * {@link Store.readDataVersion} who changed what.
     */
    readCommitCount(): number | undefined {
      return commits.read();
    },

    /** SQLite's `PRAGMA data_version`: it moves when another connection commits. */
    readDataVersion(): number {
      return (dataVersion.get() as { data_version: number }).data_version;
    },

    /**
     * Writes through this store that may have ended or changed a token grant
     * (revocations, key and user changes); other writes (a new token, a
     * key's last use, audit rows, throttle counters) do not count.
     */
    readGrantWrites(): number {
      return grantWrites;
    },

    /** WAL syncs made after grant-ending commits, with durability `"grants"` (tests, diagnostics). */
    readWalSyncs(): number {
      return walSyncs;
    },

    revokeToken(tokenId: number, now: number): boolean {
      return Number(tokenRevoke.run({ id: tokenId, now }).changes) === 1;
    },

    /**
     * Invalidates every token of a user issued up to and including `now`, in
     * one write (the user's cutoff); returns how many live tokens that ended.
     */
    revokeTokensOfUser(userId: number, now: number): number {
      return transaction(() => revokeTokensBefore(userId, nextCutoff(userId, now), now));
    },

    /**
     * Invalidates every token of a user issued before `cutoff` (a token issued
     * at `cutoff` stays valid), in one write; returns how many live tokens
     * that ended. The cutoff only moves forward.
     */
    revokeTokensIssuedBefore(userId: number, cutoff: number, now: number): number {
      return transaction(() => revokeTokensBefore(userId, cutoff, now));
    },

    /**
     * Deletes every token row that has stopped working at `now` (expired,
     * revoked, ended by its key's expiry or revocation or its user's cutoff),
     * in windows of `batchRows` row ids, each its own short transaction, so
     * the write lock is never held long; returns how many.
     */
    purgeTokens(now: number, batchRows = PURGE_BATCH_ROWS): number {
      const bounds = tokenIdBoundsOf();
      if (bounds === undefined) return 0;
      let deleted = 0;
      for (let after = bounds.first - 1; after < bounds.last; after += batchRows) {
        deleted += purgeRange(after, batchRows, now);
      }
      return deleted;
    },

    /** The live (not yet forgotten) brute-force counters of up to two subjects. */
    findLoginFailures,

    /**
     * Records one failed login against each subject, in one transaction:
     * `next` turns the live counter (or `undefined`) into the new one. Also
     * deletes up to 100 forgotten counters.
     */
    recordLoginFailures(
      subjects: readonly string[],
      now: number,
      next: (previous: LoginFailures | undefined, subject: string) => LoginFailures,
    ): LoginFailures[] {
      return transaction(() => {
        const live = findLoginFailures(subjects, now);
        const updated = subjects.map((subject) =>
          next(live.find((row) => row.subject === subject), subject)
        );
        for (const row of updated) {
          failuresUpsert.run({
            subject: row.subject,
            failures: row.failures,
            last_failure_at: row.lastFailureAt,
            blocked_until: row.blockedUntil,
            forget_at: row.forgetAt,
          });
        }
        failuresPrune.run({ now });
        return updated;
      });
    },

    /** Every live brute-force counter, the longest-blocked first (admin listings). */
    listLoginFailures(now: number): LoginFailures[] {
      return (failuresLive.all({ now }) as Row[]).map(toLoginFailures);
    },

    /** Forgets a subject's counter (after a successful login); whether there was one. */
    clearLoginFailures(subject: string): boolean {
      return Number(failuresDelete.run({ subject }).changes) === 1;
    },

    /** How long a write may wait for another connection's lock, in ms. */
    busyTimeoutMs,

    /**
     * Runs `fn` with SQLite's busy wait off, so that a write meeting another
     * connection's lock fails at once with SQLITE_BUSY instead of blocking
     * the thread (and every other request) for the busy timeout. See
     * src/locked_writes.ts, which retries between turns of the event loop.
     */
    withoutBusyWait<T>(fn: () => T): T {
      db.exec("PRAGMA busy_timeout = 0");
      try {
        return fn();
      } finally {
        db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
      }
    },

    /** Suspends (`disabled`) or resumes a key that is not revoked; returns whether it changed. */
    setApiKeyDisabled(id: number, disabled: boolean, now: number): boolean {
      return Number(keySetDisabled.run({ id, disabled_at: disabled ? now : null }).changes) === 1;
    },

    /**
     * Rotation: stores the successor and makes the old key expire at
     * `oldKeyExpiresAt` (never later than its own expiry), in one transaction.
     */
    rotateApiKey(
      oldKeyId: number,
      successor: Parameters<typeof insertApiKey>[0],
      options: { oldKeyExpiresAt: number; now: number },
    ): ApiKey {
      return transaction(() => {
        const key = insertApiKey(successor, options.now);
        const { changes } = keySetReplaced.run({
          id: oldKeyId,
          replaced_by: key.id,
          expires_at: options.oldKeyExpiresAt,
        });
        // Another rotation or a revocation got there first: roll the successor back.
        if (Number(changes) !== 1) {
          throw new Error(`API key ${oldKeyId} was rotated or revoked meanwhile`);
        }
        return key;
      });
    },

    /** Adds accumulated key uses, all in one transaction. */
    recordKeyUsage(usages: readonly KeyUsage[]): void {
      if (usages.length === 0) return;
      transaction(() => {
        for (const usage of usages) {
          keyAddUsage.run({
            id: usage.apiKeyId,
            at: usage.lastUsedAt,
            address: usage.lastUsedFrom,
            count: usage.count,
          });
        }
      });
    },

    /** Appends one row to the audit log. */
    appendAudit(entry: AuditEntry): void {
      auditInsert.run({
        at: entry.at,
        actor: entry.actor,
        action: entry.action,
        subject: entry.subject,
        detail: JSON.stringify(entry.detail ?? {}),
      });
    },

    /** Audit rows at or after `since`, oldest first. */
    listAudit(since = 0): AuditRecord[] {
      return (auditSince.all({ since }) as Row[]).map((row) => ({
        id: row.id as number,
        at: row.at as number,
        actor: row.actor as string,
        action: row.action as string,
        subject: row.subject as string,
        detail: JSON.parse(row.detail as string),
      }));
    },

    /** Rows changed by this connection since it opened (SQLite total_changes()), for tests. */
    countChanges(): number {
      return (totalChanges.get() as { n: number }).n;
    },

    /** Counts the live tokens at `now`, by the same rule as the secure lookup. */
    countLiveTokens(now: number): number {
      return (tokensLive.get({ now }) as { n: number }).n;
    },

    /** The lowest and highest token row ids, or `undefined` when there are no tokens. */
    findTokenIdBounds: tokenIdBoundsOf,

    /**
     * Deletes the token rows with ids in `(afterId, afterId + size]` that
     * stopped working (expiry, revocation, key expiry or revocation, user
     * cutoff) at or before `cutoff`, in one short transaction; returns how many.
     */
    purgeTokenRange: purgeRange,

    /**
     * Writes a consistent copy of the database to a new file with SQLite's
     * online backup API, a few pages at a time (the one asynchronous store
     * function). `VACUUM INTO` would compact, but Deno allows it only with
     * every permission, since it attaches a database.
     */
    async backupTo(path: string): Promise<void> {
      await backup(db, path, { rate: BACKUP_PAGES_PER_STEP });
    },

    /** Problems found by `PRAGMA integrity_check` and `foreign_key_check`; empty when sound. */
    checkIntegrity(): string[] {
      const problems = (integrityCheck.all() as { integrity_check: string }[])
        .map((row) => row.integrity_check)
        .filter((text) => text !== "ok");
      for (const row of foreignKeyCheck.all() as Row[]) {
        problems.push(`foreign key violation: ${row.table} row ${row.rowid} -> ${row.parent}`);
      }
      return problems;
    },

    /** Moves the write-ahead log into the database and truncates it; for shutdown. */
    checkpoint(): void {
      db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    },

    /** A trivial read, for readiness checks. */
    ping(): boolean {
      // A deleted database file still answers through its open descriptor,
      // but nothing written now would survive a restart: not ready.
      if (path !== ":memory:" && !existsSync(path)) return false;
      return (ping.get() as Row | undefined)?.ok === 1;
    },

    /** Row count of a table, for listings and tests. */
    countRows(table: keyof typeof counts): number {
      return (counts[table].get() as { n: number }).n;
    },

    /** The holder of the usable key with this digest (see the statement above). */
    findKeyHolder(keyHash: Uint8Array, now: number): KeyHolder | undefined {
      const row = keyHolder.get({ key_hash: keyHash, now }) as Row | undefined;
      if (!row) return undefined;
      return {
        apiKeyId: row.api_key_id as number,
        userId: row.user_id as number,
        email: row.email as string,
        introspect: row.introspect === 1,
      };
    },

    /** The token with this digest in any state (revoked, expired, of a disabled user). */
    findTokenStatus(tokenHash: Uint8Array, now: number): TokenStatus | undefined {
      const row = tokenStatus.get({ token_hash: tokenHash, now }) as Row | undefined;
      if (!row) return undefined;
      return { ...toTokenFacts(row), live: row.live === 1 };
    },

    /**
     * Revokes the token with this digest if it was issued with this key and
     * is not revoked yet; returns its id, or `undefined` if nothing changed.
     */
    revokeTokenOfKey(tokenHash: Uint8Array, apiKeyId: number, now: number): number | undefined {
      const row = tokenRevokeOfKey.get({ token_hash: tokenHash, api_key_id: apiKeyId, now }) as
        | Row
        | undefined;
      return row?.id as number | undefined;
    },

    close(): void {
      if (db.isOpen) db.close();
      commits.close(); // after the connection: see src/wal_index.ts
      syncWal?.close();
    },
  };
}
