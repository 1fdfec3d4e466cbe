/**
 * The row and query types of the store's operator and admin-view methods
 * (see `Store` in store.ts, which re-exports them), used by the admin API.
 *
 * @module
 */

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
