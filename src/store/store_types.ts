/**
 * The row and argument types of the store's methods (see `Store` in
 * store.ts, which re-exports them): users, API keys, tokens and grants,
 * login failures, the audit log and retention.
 *
 * @module
 */

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
  /**
   * The key's own expiry (ms since the epoch), `null` for none: read with the holder, so that a
   * cache of holders checks it on every hit without a second read.
   */
  keyExpiresAt: number | null;
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

/**
 * The brute-force counters a login's first read returns with its user and key
 * (`Store.findUserAndKey`): those of `subjects`, and the found key's.
 */
export interface LoginFailuresRead {
  /** At most two subjects (a client address's, say). */
  subjects: readonly string[];
  /** With a key found, its counter `${keySubjectPrefix}${key.id}` is read too. */
  keySubjectPrefix: string;
  /** Counters forgotten by now are left out, as by `Store.findLoginFailures`. */
  now: number;
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
 * A write that names a user (its address in an audit row or a mail) without being keyed by it:
 * with `ofUser`, it is made only while that user exists, checked in its transaction, so that a
 * deletion committing meanwhile (whose anonymisation already ran) leaves no row naming the
 * address behind.
 */
export interface NamingUser {
  /** The user the write names; a write for a user that is gone throws `StoreConflict`. */
  ofUser?: number;
}

/**
 * A position in this store's grant change feed: it moves whenever the store has learned of a
 * change that may end or alter a token grant, committed by this process or any other, and
 * {@link GrantFeedStore.readGrantChanges} says what changed since an earlier one. It is local to
 * the store object (not the database's position), and never goes back.
 */
export type GrantEpoch = number;

/** What a grant-ending change touches: one token, one API key, one user, or everything. */
export type GrantScopeKind = "token" | "key" | "user" | "all";

/**
 * The scope of one recorded change: grants of this token id, API key id or user id may have
 * ended or changed; `all`: any grant may have (a schema change, or a change this store cannot
 * account for: a gap in the change record, a restored backup, a listener that cannot be
 * reconciled).
 */
export type GrantScope =
  | { readonly kind: "token" | "key" | "user"; readonly id: number }
  | { readonly kind: "all" };

/** Changes a store has learned of, by scope. */
export type GrantInvalidations = Record<GrantScopeKind, number>;

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
  /** The audit rows that took `anonymousRef` as subject instead of an e-mail. */
  auditRows: number;
}

/**
 * Makes a deleted user's audit rows anonymous, in the delete's transaction: every deletion of a
 * user (its own, an operator's, a refused or expired sign-up's) does (the one exception
 * to the append-only log; src/store/audit_anonymize.ts has the rules): the rows whose subject
 * is `user:<address>` while the user held that address (its e-mail, and the ones it had before,
 * followed back through its `user.renamed` and `portal.email_changed` rows; never a row of
 * another holder of the address, before or after) take `ref` as subject, and every address in
 * their details is replaced by `ref`; so are the addresses in the details of the user's own
 * rows (actor `anonymousActor`) and the user's addresses in any other row of its time with
 * them (`detail.user` of `key.created` and `token.revoked`). The outbox's mail to those
 * addresses goes too, unless another user holds the address now.
 */
export interface AuditAnonymizing {
  /** The opaque name the rows take (`user:deleted:…`). */
  anonymousRef: string;
  /** The actor of the user's own changes (`portal:user:<id>`). */
  anonymousActor: string;
  /**
   * Counters (login_failures rows) that name the user's address by a keyed digest only the
   * domain can compute (the portal throttle's): every row whose subject starts with one of
   * these goes too.
   */
  forgetCounters?: readonly string[];
}

/** One bounded retention batch: at most `size` ended token rows. */
export interface TokenBatch {
  size: number;
  /** Rows whose token stopped working at or before this instant are deleted. */
  cutoff: number;
  /**
   * Only keys and users whose end (a key's revocation or expiry, a user's cutoff's `updated_at`)
   * fell after this instant are looked at for the tokens they ended: the caller knows a batch
   * with a cutoff at or after it deleted none, so the tokens of those that ended earlier are gone.
   * A token's own expiry and revocation are looked at whatever this says. Default: every key and
   * user that ever ended.
   */
  endedSince?: number;
}

/** One batch of `Store.deleteAuditBefore`. */
export interface AuditBatch {
  /** Rows written before this instant may go. */
  before: number;
  size: number;
}

/** Tables whose rows {@link Store.countRows} counts. */
export type StoreTable = "users" | "api_keys" | "tokens" | "login_failures" | "audit_log";
