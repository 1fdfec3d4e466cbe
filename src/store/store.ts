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

import type { AdminStore } from "./store_admin.ts";
import type { PortalAccountState, PortalStore } from "./store_portal.ts";
import type { LimitStore } from "./store_limits.ts";
import type {
  ApiKey,
  ApiKeyListing,
  AuditAnonymizing,
  AuditBatch,
  AuditedChange,
  AuditEntries,
  AuditEntry,
  AuditRecord,
  DeletedUser,
  GrantEpoch,
  GrantInvalidations,
  GrantLookup,
  GrantScope,
  KeyHolder,
  KeyUsage,
  LoginFailures,
  LoginFailuresRead,
  NamingUser,
  NewApiKey,
  NewToken,
  NewUser,
  StoreTable,
  TokenBatch,
  TokenGrant,
  TokenRow,
  TokenStatus,
  User,
} from "./store_types.ts";
export type * from "./store_admin.ts";
export type * from "./store_portal.ts";
export type * from "./store_limits.ts";
export type * from "./store_types.ts";

/**
 * The store: the method groups below, declared once for every backend, and
 * the admin API's operators and views ({@link AdminStore}, store_admin.ts).
 * A backend file implements a group, or names the part of one it holds
 * (`Omit<TokenStore, "listTokensOfUser">`).
 */
export interface Store
  extends
    AdminStore,
    LifecycleStore,
    UserStore,
    ApiKeyStore,
    TokenStore,
    GrantFeedStore,
    LoginFailureStore,
    AuditStore,
    RetentionStore,
    PortalStore,
    LimitStore {}

/** Opening checks and closing. Part of {@link Store}. */
export interface LifecycleStore {
  /** For `/readyz`: a trivial round trip; `false` or a rejection mean not ready. */
  checkStoreReady(): Promise<boolean>;
  /**
   * Why writes fail for a reason a retry will not soon cure (disk full, read-only file
   * system), or `undefined` since the last write succeeded; tries a harmless probe write
   * first, so that readiness recovers by itself. `/readyz` answers 503 `degraded` with it.
   * A failed WAL sync of SQLite's durability `"grants"` is answered until the process restarts.
   */
  findWriteFailure(): Promise<string | undefined>;
  /** Releases the connection(s); further calls fail. Idempotent. */
  closeStore(): Promise<void>;
}

/** Users. Part of {@link Store}. */
export interface UserStore {
  findUserByEmail(email: string): Promise<User | undefined>;
  /**
   * A login's first read: the user with this e-mail and the key with this digest, either or
   * both undefined, and the brute-force counters `failures` asks for (none without it), read
   * together (one round trip on a networked store). Counters come sorted by subject.
   */
  findUserAndKey(
    email: string,
    keyHash: Uint8Array,
    failures?: LoginFailuresRead,
  ): Promise<{ user?: User; key?: ApiKey; failures: LoginFailures[] }>;
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
    change: AuditedChange<number> & {
      passwordHash: string;
      /** The digest of the one portal session that stays (a change made in it). */
      keepPortalSession?: Uint8Array;
    },
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
   * token rows went. The user's earlier audit rows take `anonymousRef` instead of its e-mail
   * ({@link AuditAnonymizing}). With `onlyPortalState`, only while the user's portal account is
   * in that state, checked in the same transaction (an operator's refusal of a waiting account
   * must not delete one approved meanwhile).
   * @throws {StoreConflict} with `onlyPortalState`, when the account is not in it (or gone):
   * nothing written.
   */
  deleteUser(
    userId: number,
    change: AuditedChange<DeletedUser> & AuditAnonymizing & {
      onlyPortalState?: PortalAccountState;
    },
  ): Promise<DeletedUser>;
}

/** API keys. Part of {@link Store}. */
export interface ApiKeyStore {
  /** @throws {StoreConflict} when the digest is taken. */
  /**
   * Adds a key. With `maxLiveKeys`, only while the user holds fewer keys that are not revoked,
   * checked and inserted in one transaction (concurrent inserts never pass the cap).
   * @throws {StoreConflict} at the cap, or when the user is gone (deleted meanwhile); nothing
   * written.
   */
  insertApiKey(
    key: NewApiKey,
    change: AuditedChange<ApiKey> & { maxLiveKeys?: number },
  ): Promise<ApiKey>;
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
   * @throws {StoreConflict} when the old key was rotated or revoked meanwhile, or its user deleted
   * (nothing written).
   */
  rotateApiKey(
    oldKeyId: number,
    change: AuditedChange<ApiKey> & { successor: NewApiKey; oldKeyExpiresAt: number },
  ): Promise<ApiKey>;
  /** Adds accumulated uses (count, latest time and address) in one transaction; not audited. */
  recordKeyUsage(usages: readonly KeyUsage[]): Promise<void>;
}

/** Tokens and the grants they carry. Part of {@link Store}. */
export interface TokenStore {
  /**
   * Stores a new token, revokes the oldest live tokens of the same user and
   * key beyond `maxLiveTokens`, and forgets the `clearLoginFailures`
   * counters (a successful login), in one transaction; resolves to the
   * token's id. Each `audit` entry is recorded with that id added to its
   * detail as `token_id` (so a backend can write it in the statement that
   * inserts the token).
   *
   * @throws {StoreConflict} when `token.userCutoff` no longer holds (nothing written).
   * @throws {StoreBlocked} when one of the `unlessBlocked` counters is blocked at its `now`
   * (nothing written): a login's last throttle check, in the transaction that stores its token.
   */
  insertToken(
    token: NewToken,
    change: {
      audit: AuditEntries;
      clearLoginFailures?: readonly string[];
      unlessBlocked?: { subjects: readonly string[]; now: number };
    },
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
}

/** The grant change feed. Part of {@link Store}. */
export interface GrantFeedStore {
  /**
   * The current {@link GrantEpoch}, synchronously: the grant cache calls it before every
   * lookup and, when it moved, asks {@link readGrantChanges} what changed and evicts exactly
   * the entries those scopes touch; a value read on a miss is kept only if no change touching
   * it was learned while it was read. Cheap (a load from memory when nothing moved) and exact:
   * once a change that may end a grant has committed anywhere, the next call differs and the
   * change's scope is known (a networked backend: once notified or polled, within its
   * staleness bound). A grant-ending write records its scope in the database, in the write's
   * transaction (the change record, docs/architecture.md).
   *
   * Exact within one process: the stores of one process (`--workers`: one per request worker,
   * one for the main thread) see each other's committed changes on their very next call, as
   * soon as the writing call resolved. SQLite needs nothing for this (its shared WAL index
   * moves, and the change record is read); the PostgreSQL store is given a ring of recent
   * scopes the process's stores share (its `sharedGrantCounter` option), appends its own
   * committed changes to it before the write resolves, and reads it here.
   *
   * `undefined` when the backend cannot confirm right now that it has seen every such
   * change (notifications and polls silent past its staleness bound). The cache then serves
   * nothing from memory: requests go to {@link Store.findTokenGrant}, which rejects with
   * `StoreUnavailable` (503, fail closed) while the database cannot answer.
   */
  readGrantEpoch(): GrantEpoch | undefined;
  /**
   * The scopes of the changes learned after `since` (an earlier {@link readGrantEpoch}), up to
   * the current one, oldest first; `undefined` when the store can no longer say (`since` is
   * older than what it keeps in memory): the caller then drops everything.
   */
  readGrantChanges(since: GrantEpoch): readonly GrantScope[] | undefined;
  /** How many changes this store has learned of, by scope (for metrics). */
  readGrantInvalidations(): GrantInvalidations;
}

/** Login failures (the throttle's counters). Part of {@link Store}. */
export interface LoginFailureStore {
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
}

/** The audit log. Part of {@link Store}. */
export interface AuditStore {
  /**
   * Appends an entry on its own (changes append theirs through their method).
   * The log is append-only: no method changes or deletes a row, and a
   * backend refuses such writes in the database itself.
   * @throws {StoreConflict} when `options.ofUser` is gone (nothing written).
   */
  appendAudit(entry: AuditEntry, options?: NamingUser): Promise<void>;
  /** Audit rows at or after `since`, oldest first (by id). */
  listAudit(since?: number): Promise<AuditRecord[]>;
}

/** Retention: ending and purging old tokens, counting rows. Part of {@link Store}. */
export interface RetentionStore {
  /**
   * Deletes, in a short transaction, at most `batch.size` token rows that stopped working at
   * or before `batch.cutoff`: the earliest of the token's expiry and revocation, its key's
   * expiry and revocation, and (issued before its user's cutoff) when that cutoff was set. A
   * disabled key or user is no end: it may be enabled again. Resolves to how many: fewer than
   * `batch.size` does not mean none is left (a row ended in two ways takes two places), 0 does,
   * also beside another deleter (a second janitor, `token purge`, a user's deletion): a batch
   * whose rows it took meanwhile looks again. The rows are found through indexes: a batch does
   * not read the rows it keeps. With `batch.endedSince`, neither the keys nor the users that
   * ended before it.
   */
  deleteEndedTokens(batch: TokenBatch): Promise<number>;
  /**
   * Deletes, in one short transaction, up to `batch.size` of the oldest audit rows written
   * before `batch.before` (the audit retention, run by the janitor); resolves to how many.
   * Not audited here: the janitor records one `audit.pruned` entry per sweep. The database
   * still refuses any other delete of an audit row.
   */
  deleteAuditBefore(batch: AuditBatch): Promise<number>;
  /** Row count of a table, for listings, metrics and tests. */
  countRows(table: StoreTable): Promise<number>;
}
