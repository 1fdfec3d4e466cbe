/**
 * The store's operator and admin-view methods, used by the admin API
 * (src/http/admin/), and their row and query types. `Store` (store.ts)
 * extends {@link AdminStore} and re-exports the types.
 *
 * @module
 */
import type {
  ApiKeyListing,
  AuditedChange,
  AuditRecord,
  LoginFailures,
  User,
} from "./store_types.ts";

/** What an operator of the admin API may do: read, or read and change. */
export type OperatorRole = "read" | "write";

/** An operator of the admin API, without the token itself (only its digest is stored). */
export interface Operator {
  id: number;
  /** Unique among operators that are not revoked; the audit log's actor is `operator:<name>`. */
  name: string;
  role: OperatorRole;
  /** The first characters of the token, shown in listings. */
  prefix: string;
  createdAt: number;
  revokedAt: number | null;
}

/** What `Store.insertOperator` needs. */
export interface NewOperator {
  name: string;
  role: OperatorRole;
  /** SHA-256 of the operator token. */
  tokenHash: Uint8Array;
  prefix: string;
}

/** One page of `Store.searchUsers`. */
export interface UserQuery {
  /** Only users whose e-mail contains this text (compared in lower case). */
  search?: string;
  /** Only users whose e-mail sorts after this one (the page cursor). */
  afterEmail?: string;
  /** At most this many users. */
  limit: number;
}

/** A token as the admin API lists it: never the token or its digest. */
export interface TokenListing {
  id: number;
  apiKeyId: number;
  issuedAt: number;
  /** The token's own expiry. */
  expiresAt: number;
  revokedAt: number | null;
  /** Valid and unexpired at the listing's `now`, by the rule of `Store.findTokenGrant`. */
  live: boolean;
}

/** One page of `Store.searchTokensOfUser`, newest first. */
export interface TokenQuery {
  now: number;
  /** Only tokens with a smaller id (the page cursor). */
  beforeId?: number;
  /** Only tokens live at `now`. */
  liveOnly?: boolean;
  limit: number;
}

/** One page of `Store.searchApiKeys`, by the owner's e-mail then key id. */
export interface KeyQuery {
  /** Only this user's keys. */
  userId?: number;
  /** Only keys not revoked whose last use (or creation, if never used) is at or before this. */
  unusedSince?: number;
  /** Only keys after this one in the order (the page cursor). */
  after?: { email: string; id: number };
  limit: number;
}

/** A failed-login counter as the admin API lists it: with its key's owner, if a key's. */
export interface LoginFailureListing extends LoginFailures {
  /** For `key:<id>` counters of a key that still exists: its owner's e-mail. */
  email?: string;
}

/** One page of `Store.searchLoginFailures`: live counters, the longest-blocked first. */
export interface LoginFailureQuery {
  now: number;
  /** Only counters after this one in the order (the page cursor). */
  after?: { blockedUntil: number; subject: string };
  limit: number;
}

/** A place in the audit log's order (newest first): an entry's time, then its id. */
export interface AuditCursor {
  at: number;
  id: number;
}

/**
 * One page of `Store.searchAuditPage`, newest first (by time, then id); every given field
 * must match.
 */
export interface AuditQuery {
  actor?: string;
  action?: string;
  subject?: string;
  /** Rows at or after this instant. */
  from?: number;
  /** Rows before this instant. */
  to?: number;
  /** Only rows after this place in the order: older, or as old with a smaller id. */
  cursor?: AuditCursor;
  limit: number;
}

/**
 * Entries a page with two or more of `actor`, `action` and `subject` reads from the index of
 * the first (subject, actor, action) before it stops: a page's work is bounded however few
 * rows match, and a page cut short says where to go on ({@link AuditPage.next}).
 */
export const AUDIT_SCAN_ROWS = 500;

/** A page of the audit log. */
export interface AuditPage {
  entries: AuditRecord[];
  /**
   * Where the next page starts, or `undefined` when no row after this page matches. A page
   * whose scan stopped at {@link AUDIT_SCAN_ROWS} may hold fewer than `limit` entries (even
   * none) and still have a `next`.
   */
  next?: AuditCursor;
}

/** The store's part for the admin API: its operators and paged views. */
export interface AdminStore {
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
  /** API keys with their owner, by e-mail then id, filtered and paged (see {@link KeyQuery}). */
  searchApiKeys(query: KeyQuery): Promise<ApiKeyListing[]>;
  /** Live failed-login counters, the longest-blocked first, paged (see {@link LoginFailureQuery}). */
  searchLoginFailures(query: LoginFailureQuery): Promise<LoginFailureListing[]>;
  /** How many counters refuse logins at `now` (one aggregate, for the dashboard). */
  countBlockedSubjects(now: number): Promise<number>;
  /** A user's tokens, newest first (see {@link TokenQuery}). */
  searchTokensOfUser(userId: number, query: TokenQuery): Promise<TokenListing[]>;
  /**
   * Audit rows, newest first, filtered and paged (see {@link AuditQuery}), with where the next
   * page starts. Reads through an index for every combination of filters, and at most
   * {@link AUDIT_SCAN_ROWS} index entries beyond the page (see docs/performance.md).
   */
  searchAuditPage(query: AuditQuery): Promise<AuditPage>;
  /** The entries of {@link AdminStore.searchAuditPage}'s page. */
  searchAudit(query: AuditQuery): Promise<AuditRecord[]>;
}
