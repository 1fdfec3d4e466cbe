/**
 * The store contract: what keygate needs from a database, declared once.
 *
 * Every backend implements {@link Store} and runs the one conformance suite,
 * `tests/store/contract.ts`, so a rule that lives in SQL cannot drift between
 * dialects (see docs/architecture.md). Rules every implementation keeps:
 * - **Atomic on its own.** Each mutating method is one transaction: its
 *   writes and its audit rows commit together or not at all. No caller ever
 *   holds a transaction.
 * - **Audited.** A mutating method takes its audit entries ({@link AuditOf})
 *   and appends them in that transaction; a function form sees the method's
 *   result (a new row's id, how many tokens ended) and may return `undefined`
 *   for "nothing changed, nothing to record".
 * - **May wait.** Every method that talks to the database returns a
 *   Promise. The one synchronous read is {@link Store.readGrantEpoch}, which
 *   the secure path's cache hit calls on every request.
 * - **Fails with store errors.** A database that is locked, full or
 *   unreachable makes a method reject with `StoreUnavailable` (the edge
 *   answers 503 with `Retry-After`); a uniqueness or concurrent-change
 *   violation with `StoreConflict` (see errors.ts). Absence is `undefined`.
 * - **Times come from the caller** (`now`, in ms since the epoch), never from
 *   the database's clock, so tests inject a clock.
 *
 * @module
 */

import type {
  AuditQuery,
  NewOperator,
  Operator,
  TokenListing,
  TokenQuery,
  UserQuery,
} from "./admin_rows.ts";
export type {
  AuditQuery,
  NewOperator,
  Operator,
  OperatorRole,
  TokenListing,
  TokenQuery,
  UserQuery,
} from "./admin_rows.ts";

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
  /** Tokens issued before this instant are invalid (the revoke-before cutoff). */
  tokensValidFrom: number;
}

/** What {@link Store.insertUser} needs. */
export type NewUser = Pick<User, "email" | "passwordHash" | "tokenTimeoutSeconds">;

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

/** What {@link Store.insertApiKey} and {@link Store.rotateApiKey} need. */
export interface NewApiKey {
  userId: number;
  /** SHA-256 of the normalised key. */
  keyHash: Uint8Array;
  /** The first characters of the key, shown in listings. */
  prefix: string;
  label: string;
  expiresAt?: number | null;
  introspect?: boolean;
}

/** An API key with its owner's e-mail and state, for listings. */
export interface ApiKeyListing extends ApiKey {
  email: string;
  /** Whether the key's user is disabled (the key then does not authenticate). */
  userDisabled: boolean;
}

/** Who holds a usable API key: the key's id and its enabled user. */
export interface KeyHolder {
  apiKeyId: number;
  userId: number;
  email: string;
  /** Whether the key may introspect tokens (a resource-server key). */
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

/** What {@link Store.findTokenGrant} looks up: both digests, at `now`. */
export interface GrantLookup {
  tokenHash: Uint8Array;
  keyHash: Uint8Array;
  now: number;
}

/** A valid token found by its digest and its key's, joined with its user and key. */
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

/** A token found by its digest, whatever its state, for introspection. */
export interface TokenStatus extends Omit<TokenGrant, "keyExpiresAt"> {
  /** False once the token or its key is revoked, or its user disabled. Expiry is the caller's check. */
  live: boolean;
}

/** What {@link Store.insertToken} needs. */
export interface NewToken {
  /** SHA-256 of the token. */
  tokenHash: Uint8Array;
  userId: number;
  apiKeyId: number;
  issuedAt: number;
  expiresAt: number;
  /** Live tokens allowed per user and key; the oldest beyond it are revoked, in the same transaction. */
  maxLiveTokens: number;
  /**
   * The user's `tokensValidFrom` as the login read it, before its password check. When given, the
   * insert is refused with `StoreConflict` (nothing written) if the user's cutoff has moved since,
   * or the user is gone or disabled: a password change, revoke-all or disable that committed while
   * the check ran must not let the token through. Logins always give it.
   */
  userCutoff?: number;
}

/** A brute-force counter row (see src/auth/throttle.ts). */
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

/** One row of the append-only audit log. */
export interface AuditEntry {
  at: number;
  /** `cli:<user>`, `api_key:<id>` or `anonymous`. */
  actor: string;
  /** A stable word such as `user.added` or `token.issued` (see src/auth/audit.ts). */
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

/** Audit rows to append: one, several, or none. */
export type AuditEntries = AuditEntry | readonly AuditEntry[] | undefined;

/**
 * The audit rows a mutating method appends in its own transaction: given
 * outright, or computed from the method's result once it is known (inside
 * the transaction, so the rows commit with the change).
 */
export type AuditOf<T> = AuditEntries | ((result: T) => AuditEntries);

/** A change at `now`, recorded in the audit log. */
export interface AuditedChange<T> {
  now: number;
  audit: AuditOf<T>;
}

/**
 * A position in the grant change feed: it moves whenever a change that may
 * end or alter a token grant has been committed, by this process or any
 * other. Only equality is meaningful.
 */
export type GrantEpoch = number;

/** A token row for listings: ids and times, never the digest. */
export interface TokenRow {
  id: number;
  apiKeyId: number;
  issuedAt: number;
  expiresAt: number;
  revokedAt: number | null;
}

/** What {@link Store.deleteUser} removed with the user. */
export interface DeletedUser {
  apiKeys: number;
  tokens: number;
}

/** The lowest and highest token row ids. */
export interface TokenIdRange {
  first: number;
  last: number;
}

/** One bounded retention batch: token rows with ids in `(afterId, afterId + size]`. */
export interface TokenBatch {
  afterId: number;
  size: number;
  /** Rows whose token stopped working at or before this instant are deleted. */
  cutoff: number;
}

/** Tables whose rows {@link Store.countRows} counts. */
export type StoreTable = "users" | "api_keys" | "tokens" | "login_failures" | "audit_log";

/**
 * The store. Method groups: lifecycle, users, API keys, tokens and grants,
 * the grant change feed, login failures, audit, retention.
 */
export interface Store {
  // ---- Lifecycle -------------------------------------------------------------------------

  /** For `/readyz`: a trivial round trip; `false` or a rejection mean not ready. */
  checkStoreReady(): Promise<boolean>;
  /**
   * Why writes fail for a reason a retry will not soon cure (disk full, read-only file
   * system), or `undefined` since the last write succeeded; tries a harmless probe write
   * first, so that readiness recovers by itself. `/readyz` answers 503 `degraded` with it.
   */
  findWriteFailure(): Promise<string | undefined>;
  /** Releases the connection(s); further calls fail. Idempotent. */
  closeStore(): Promise<void>;

  // ---- Users -----------------------------------------------------------------------------

  findUserByEmail(email: string): Promise<User | undefined>;
  findUserById(id: number): Promise<User | undefined>;
  /** Every user, by e-mail. */
  listUsers(): Promise<User[]>;
  /** @throws {StoreConflict} when the e-mail is taken. */
  insertUser(user: NewUser, change: AuditedChange<User>): Promise<User>;
  /** Sets the user's own token lifetime (`null`: the server's default). */
  updateUserTimeout(
    userId: number,
    change: AuditedChange<void> & { tokenTimeoutSeconds: number | null },
  ): Promise<void>;
  /**
   * Replaces the password hash and moves the user's cutoff past `now`, so
   * every token issued so far is invalid; resolves to how many live tokens ended.
   */
  updateUserPassword(
    userId: number,
    change: AuditedChange<number> & { passwordHash: string },
  ): Promise<number>;
  /**
   * Disables a user (moving the cutoff as above: resolves to how many live
   * tokens ended) or enables it again (resolves to 0; ended tokens stay ended).
   */
  updateUserDisabled(
    userId: number,
    change: AuditedChange<number> & { disabled: boolean },
  ): Promise<number>;

  /**
   * Changes a user's e-mail; keys, tokens, counters and timeout stay with the user's id.
   *
   * @throws {StoreConflict} when another user has the e-mail.
   */
  updateUserEmail(userId: number, change: AuditedChange<void> & { email: string }): Promise<void>;
  /**
   * Deletes a user with their API keys, tokens and failed-login counters, in
   * one transaction; the audit log keeps its rows. Resolves to how many keys and
   * token rows went.
   */
  deleteUser(userId: number, change: AuditedChange<DeletedUser>): Promise<DeletedUser>;

  // ---- API keys --------------------------------------------------------------------------

  /** @throws {StoreConflict} when the digest is taken. */
  insertApiKey(key: NewApiKey, change: AuditedChange<ApiKey>): Promise<ApiKey>;
  findApiKeyByHash(keyHash: Uint8Array): Promise<ApiKey | undefined>;
  findApiKeyById(id: number): Promise<ApiKey | undefined>;
  /** Keys of one user by id, or of every user by e-mail then id. */
  listApiKeys(userId?: number): Promise<ApiKeyListing[]>;
  /** The holder of the **usable** key: not revoked, disabled or expired at `now`, user enabled. */
  findKeyHolder(keyHash: Uint8Array, now: number): Promise<KeyHolder | undefined>;
  /** Revokes a key (if not yet revoked) and its live tokens; resolves to how many tokens ended. */
  revokeApiKey(id: number, change: AuditedChange<number>): Promise<number>;
  /** Suspends or resumes a key that is not revoked; resolves to whether a row changed. */
  updateApiKeyDisabled(
    id: number,
    change: AuditedChange<boolean> & { disabled: boolean },
  ): Promise<boolean>;
  /**
   * Rotation: stores the successor and makes the old key expire at `oldKeyExpiresAt`
   * (never later than its own expiry); resolves to the successor.
   * @throws {StoreConflict} when the old key was rotated or revoked meanwhile (nothing written).
   */
  rotateApiKey(
    oldKeyId: number,
    change: AuditedChange<ApiKey> & { successor: NewApiKey; oldKeyExpiresAt: number },
  ): Promise<ApiKey>;
  /** Adds accumulated uses (count, latest time and address) in one transaction; not audited. */
  recordKeyUsage(usages: readonly KeyUsage[]): Promise<void>;

  // ---- Tokens and grants -----------------------------------------------------------------

  /**
   * Stores a new token, revokes the oldest live tokens of the same user and
   * key beyond `maxLiveTokens`, and forgets the `clearLoginFailures`
   * counters (a successful login), in one transaction; resolves to the
   * token's id.
   */
  insertToken(
    token: NewToken,
    change: { audit: AuditOf<number>; clearLoginFailures?: readonly string[] },
  ): Promise<number>;
  /**
   * The secure path's lookup (on a cache miss): the token with this digest,
   * issued with the key with this digest, **valid** at `now`: not revoked,
   * issued at or after its user's cutoff, its key usable (see
   * {@link Store.findKeyHolder}). The token's own expiry (capped by the
   * key's) is the caller's check, which tells `token_expired` from `invalid_token`.
   */
  findTokenGrant(lookup: GrantLookup): Promise<TokenGrant | undefined>;
  /** The token with this digest in any state (revoked, expired, of a disabled user). */
  findTokenStatus(tokenHash: Uint8Array, now: number): Promise<TokenStatus | undefined>;
  /** Revokes a token if not yet revoked; resolves to whether it was. */
  revokeToken(tokenId: number, change: AuditedChange<boolean>): Promise<boolean>;
  /**
   * Revokes the token with this digest if it was issued with `apiKeyId` and
   * is not revoked yet (RFC 7009); resolves to its id, or `undefined` if
   * nothing changed.
   */
  revokeTokenOfKey(
    tokenHash: Uint8Array,
    change: AuditedChange<number | undefined> & { apiKeyId: number },
  ): Promise<number | undefined>;
  /**
   * Moves the user's cutoff forward (never back): tokens issued before
   * `before` become invalid; without `before`, every token issued up to and
   * including `now` (the cutoff becomes later than both the old cutoff and
   * `now`). Resolves to how many live tokens ended.
   */
  revokeTokensOfUser(
    userId: number,
    change: AuditedChange<number> & { before?: number },
  ): Promise<number>;
  /** Live tokens at `now` (valid and unexpired), by the same rule as {@link Store.findTokenGrant}. */
  countLiveTokens(now: number): Promise<number>;
  /** A user's token rows in any state, newest first (admin listings). */
  listTokensOfUser(userId: number): Promise<TokenRow[]>;

  // ---- Grant change feed -----------------------------------------------------------------

  /**
   * The current {@link GrantEpoch}, synchronously: the grant cache calls it before every
   * lookup, empties itself when it moved, and caches a grant only if it did not move while
   * the grant was read. Cheap (a load from memory) and exact: once a change that may end a
   * grant has committed anywhere, the next call differs (a networked backend: once notified
   * or polled, within its staleness bound).
   *
   * `undefined` when the backend cannot confirm right now that it has seen every such
   * change (notifications and polls silent past its staleness bound). The cache then serves
   * nothing from memory: requests go to {@link Store.findTokenGrant}, which rejects with
   * `StoreUnavailable` (503, fail closed) while the database cannot answer.
   */
  readGrantEpoch(): GrantEpoch | undefined;

  // ---- Login failures --------------------------------------------------------------------

  /** The live (not yet forgotten at `now`) counters of up to two subjects. */
  findLoginFailures(subjects: readonly string[], now: number): Promise<LoginFailures[]>;
  /**
   * Records one failed login against each subject (at most two), in one
   * transaction with `audit`: `next` turns the live counter (or
   * `undefined`) into the new one. Also deletes up to 100 forgotten
   * counters. Resolves to the new counters.
   */
  recordLoginFailures(
    subjects: readonly string[],
    change: AuditedChange<LoginFailures[]> & {
      next: (previous: LoginFailures | undefined, subject: string) => LoginFailures;
    },
  ): Promise<LoginFailures[]>;
  /** Every live counter, the longest-blocked first (admin listings). */
  listLoginFailures(now: number): Promise<LoginFailures[]>;
  /** Forgets these subjects' counters; resolves to how many there were. */
  clearLoginFailures(subjects: readonly string[], change: AuditedChange<number>): Promise<number>;

  // ---- Audit -----------------------------------------------------------------------------

  /**
   * Appends an entry on its own (changes append theirs through their method).
   * The log is append-only: no method changes or deletes a row, and a
   * backend refuses such writes in the database itself.
   */
  appendAudit(entry: AuditEntry): Promise<void>;
  /** Audit rows at or after `since`, oldest first (by id). */
  listAudit(since?: number): Promise<AuditRecord[]>;

  // ---- Retention -------------------------------------------------------------------------

  /** The lowest and highest token row ids, or `undefined` when there are no tokens. */
  findTokenIdRange(): Promise<TokenIdRange | undefined>;
  /**
   * Deletes, in one short transaction, the token rows of one batch that stopped working at
   * or before `batch.cutoff`: the earliest of the token's expiry and revocation, its key's
   * expiry and revocation, and (issued before its user's cutoff) when that cutoff was set. A
   * disabled key or user is no end: it may be enabled again. Resolves to how many.
   */
  deleteEndedTokens(batch: TokenBatch): Promise<number>;
  /** Deletes every token row that stopped working at or before `cutoff`, audited (`token purge`). */
  purgeEndedTokens(cutoff: number, change: { audit: AuditOf<number> }): Promise<number>;
  /** Row count of a table, for listings, metrics and tests. */
  countRows(table: StoreTable): Promise<number>;

  // ---- Operators and admin views (the admin API, src/http/admin/) ---------------------------

  /** @throws {StoreConflict} when an operator that is not revoked has the name, or the digest is taken. */
  insertOperator(operator: NewOperator, change: AuditedChange<Operator>): Promise<Operator>;
  /** The operator with this token digest, revoked or not. */
  findOperatorByHash(tokenHash: Uint8Array): Promise<Operator | undefined>;
  /** Every operator, revoked ones too, by name then id. */
  listOperators(): Promise<Operator[]>;
  /** Revokes an operator if not yet revoked; resolves to whether it was. */
  revokeOperator(id: number, change: AuditedChange<boolean>): Promise<boolean>;
  /** Users by e-mail, filtered and paged (see {@link UserQuery}). */
  searchUsers(query: UserQuery): Promise<User[]>;
  /** A user's tokens, newest first (see {@link TokenQuery}). */
  searchTokensOfUser(userId: number, query: TokenQuery): Promise<TokenListing[]>;
  /** Audit rows, newest first, filtered and paged (see {@link AuditQuery}). */
  searchAudit(query: AuditQuery): Promise<AuditRecord[]>;
}
