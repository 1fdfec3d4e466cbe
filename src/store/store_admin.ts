/**
 * The store's operator and admin-view methods, used by the admin API
 * (src/http/admin/), and their row and query types. `Store` (store.ts)
 * extends {@link AdminStore} and re-exports the types.
 *
 * @module
 */
import type { AuditedChange, AuditRecord, User } from "./store_types.ts";

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

/** One page of `Store.searchAudit`, newest first; every given field must match. */
export interface AuditQuery {
  actor?: string;
  action?: string;
  subject?: string;
  /** Rows at or after this instant. */
  from?: number;
  /** Rows before this instant. */
  to?: number;
  /** Only rows with a smaller id (the page cursor). */
  beforeId?: number;
  limit: number;
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
  /** A user's tokens, newest first (see {@link TokenQuery}). */
  searchTokensOfUser(userId: number, query: TokenQuery): Promise<TokenListing[]>;
  /** Audit rows, newest first, filtered and paged (see {@link AuditQuery}). */
  searchAudit(query: AuditQuery): Promise<AuditRecord[]>;
}
