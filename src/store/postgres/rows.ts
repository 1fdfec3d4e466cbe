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

/**
 * The ids of at most `$2` tokens that ended ({@link TOKEN_ENDED_AT}) at or before `$1`, found
 * through indexes, one leg per term of the rule's `least()`, of the keys and users that ended
 * after `$3` (see the SQLite store's `ENDED_TOKEN_IDS`, and tests/store/janitor_plan_test.ts for
 * the plans). The key and user legs
 * look up each ended key's and cut-off user's tokens in a `LATERAL` subquery with `OFFSET 0`, which
 * the planner cannot merge into a join: with many keys ended or users cut off, it would otherwise
 * hash-join them against a scan of the whole token table.
 */
export const ENDED_TOKEN_IDS = `(SELECT id FROM tokens WHERE expires_at <= $1)
  UNION ALL (SELECT id FROM tokens WHERE revoked_at <= $1)
  UNION ALL (SELECT t.id FROM api_keys k CROSS JOIN LATERAL
      (SELECT id FROM tokens WHERE api_key_id = k.id OFFSET 0) t
    WHERE k.revoked_at > $3 AND k.revoked_at <= $1)
  UNION ALL (SELECT t.id FROM api_keys k CROSS JOIN LATERAL
      (SELECT id FROM tokens WHERE api_key_id = k.id OFFSET 0) t
    WHERE k.expires_at > $3 AND k.expires_at <= $1)
  UNION ALL (SELECT t.id FROM users u CROSS JOIN LATERAL
      (SELECT id FROM tokens WHERE user_id = u.id AND issued_at < u.tokens_valid_from OFFSET 0) t
    WHERE u.tokens_valid_from > 0 AND u.updated_at > $3 AND u.updated_at <= $1)
  LIMIT $2`;

/**
 * Row ids as a `bigint[]` literal, for a parameter cast in SQL (`= ANY($1::bigint[])`): the
 * planner then knows how many (the statements are planned with their parameters) and looks each
 * up through the primary key. Not a JSON array unpacked in SQL (`IN (SELECT … FROM
 * jsonb_array_elements_text($1))`): the planner takes that for 100 rows whatever it holds, and
 * for one id in a table of 20,000 keys chose a hash join over a scan of the whole table. Not the
 * driver's array parameter either: connect.ts turns off the array types it needs.
 */
export function toIdArray(ids: readonly number[]): string {
  for (const id of ids) {
    if (!Number.isSafeInteger(id)) throw new TypeError(`Not a row id: ${id}`);
  }
  return `{${ids.join(",")}}`;
}
