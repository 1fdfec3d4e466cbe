/**
 * Rows of the PostgreSQL store as domain values, and the SQL rules the
 * contract pins (usable key, valid token, when a token ended), written once.
 *
 * @module
 */
import type postgres from "postgres";
import type { ApiKey, LoginFailures, TokenStatus, User } from "../store.ts";

export type Row = Record<string, unknown>;

/** The one rule for "key `k` of user `u` is usable at `now`". */
export function keyUsable(sql: postgres.Sql | postgres.TransactionSql, now: number) {
  return sql`k.revoked_at IS NULL AND k.disabled_at IS NULL
    AND (k.expires_at IS NULL OR k.expires_at > ${now}) AND u.disabled = 0`;
}

/**
 * The one rule for "token `t` is valid at `now`, its own expiry aside": not
 * revoked, issued at or after its user's cutoff, its key usable.
 */
export function tokenValid(sql: postgres.Sql | postgres.TransactionSql, now: number) {
  return sql`t.revoked_at IS NULL AND t.issued_at >= u.tokens_valid_from
    AND ${keyUsable(sql, now)}`;
}

/**
 * When token `t` stopped working for good (see the SQLite store's rule):
 * the earliest of its expiry and revocation, its key's expiry and
 * revocation, and, for a token issued before its user's cutoff, when the
 * cutoff was set (`u.updated_at`).
 */
export const TOKEN_ENDED_AT = `least(t.expires_at,
  coalesce(t.revoked_at, t.expires_at),
  coalesce(k.expires_at, t.expires_at),
  coalesce(k.revoked_at, t.expires_at),
  CASE WHEN t.issued_at < u.tokens_valid_from THEN u.updated_at ELSE t.expires_at END)`;

export function toUser(row: Row): User {
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

export function toApiKey(row: Row): ApiKey {
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

export function toTokenFacts(row: Row): Omit<TokenStatus, "live"> {
  return {
    tokenId: row.token_id as number,
    userId: row.user_id as number,
    email: row.email as string,
    apiKeyId: row.api_key_id as number,
    issuedAt: row.issued_at as number,
    expiresAt: row.expires_at as number,
  };
}

export function toLoginFailures(row: Row): LoginFailures {
  return {
    subject: row.subject as string,
    failures: row.failures as number,
    lastFailureAt: row.last_failure_at as number,
    blockedUntil: row.blocked_until as number,
    forgetAt: row.forget_at as number,
  };
}
