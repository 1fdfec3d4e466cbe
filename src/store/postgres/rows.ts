/**
 * The SQL rules the contract pins (usable key, valid token, when a token
 * ended), written once for PostgreSQL; rows become values in ../rows.ts.
 *
 * @module
 */
import type postgres from "postgres";

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
