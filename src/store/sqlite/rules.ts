/**
 * The rules that live in SQL, written once as fragments over the aliases
 * `t` (tokens), `k` (api_keys) and `u` (users). The conformance suite
 * (tests/store/contract.ts) pins each of them, so another backend's dialect
 * cannot drift.
 *
 * @module
 */
import { MAX_TIME_MS } from "../../platform/clock.ts";

/**
 * The one rule for "key `k` of user `u` is usable at `:now`": not revoked,
 * disabled or expired, and its user enabled.
 */
export const KEY_USABLE = `k.revoked_at IS NULL AND k.disabled_at IS NULL
  AND (k.expires_at IS NULL OR k.expires_at > :now) AND u.disabled = 0`;

/**
 * The one rule for "token `t` is valid at `:now`, its own expiry aside": its
 * key is usable, it is not revoked, and it was issued at or after its user's
 * cutoff. The token's expiry is left to the caller, which tells an expired
 * token (401 `token_expired`) from an invalid one.
 */
export const TOKEN_VALID = `t.revoked_at IS NULL AND t.issued_at >= u.tokens_valid_from
  AND ${KEY_USABLE}`;

/**
 * Token `t`'s expiry as read: at most the latest time a `Date` holds, because
 * the driver cannot even read an integer beyond 2^53 (see `toExpiry`, rows.ts).
 */
export const TOKEN_EXPIRES_AT = `min(t.expires_at, ${MAX_TIME_MS})`;

/**
 * The columns of key `k` as `toApiKey` (rows.ts) reads them, its expiry
 * capped like {@link TOKEN_EXPIRES_AT}: a `SELECT *` could not even be read
 * with an expiry beyond 2^53. A column added to `api_keys` is added here.
 */
export const KEY_COLUMNS = `k.id, k.key_hash, k.prefix, k.user_id, k.label, k.created_at,
  k.revoked_at, min(k.expires_at, ${MAX_TIME_MS}) AS expires_at, k.disabled_at, k.replaced_by,
  k.last_used_at, k.last_used_from, k.use_count, k.introspect`;

/** {@link TOKEN_VALID} and not expired at `:now`: a live token. */
export const TOKEN_LIVE = `${TOKEN_VALID} AND t.expires_at > :now`;

/**
 * When token `t` stopped working for good: the earliest of its expiry, its
 * revocation, its key's expiry or revocation, and, for a token issued before
 * its user's cutoff, the user's `updated_at` (set when the cutoff was
 * raised, and only ever later: never before the token stopped, so retention
 * is never cut short). A disabled key or user is not an end: it can be
 * enabled again (disabling a user also moves the cutoff, which is). Rows
 * whose end lies at or before `:cutoff` may be deleted; the janitor's
 * retention counts from this instant.
 */
export const TOKEN_ENDED_AT = `min(t.expires_at,
  coalesce(t.revoked_at, t.expires_at),
  coalesce(k.expires_at, t.expires_at),
  coalesce(k.revoked_at, t.expires_at),
  CASE WHEN t.issued_at < u.tokens_valid_from THEN u.updated_at ELSE t.expires_at END)`;

/**
 * The ids of at most `:size` tokens that ended ({@link TOKEN_ENDED_AT}) at or before `:cutoff`,
 * found through indexes, never by walking the token table (`EXPLAIN QUERY PLAN` in
 * tests/store/janitor_plan_test.ts). The rule's `min()` is at or before `:cutoff` exactly when one
 * of its terms is, so there is one leg per term:
 * - the token's expiry (`tokens_by_expiry`), and its revocation (`tokens_by_revocation`, which
 *   holds revoked rows only);
 * - its key's revocation, and its key's expiry: the keys that ended in `(:since, :cutoff]`
 *   (`api_keys_by_revocation`, `api_keys_by_expiry`), then their tokens (`tokens_by_api_key`);
 *   `CROSS JOIN` keeps SQLite from walking the tokens instead;
 * - its user's cutoff: the users cut off (`tokens_valid_from > 0`; issue times are positive) whose
 *   `updated_at` is in `(:since, :cutoff]` (`users_by_cutoff`), then their tokens issued before
 *   the cutoff (`tokens_by_user_issue`), never those issued since.
 * So a batch reads the ended rows, and one index entry per key and per user that ended since
 * `:since` (`EVER` in src/store/rows.ts: ever); what it keeps of the token table it does not
 * read. A row ended in two ways may come twice: the caller's `id IN` counts it once.
 */
export const ENDED_TOKEN_IDS = `SELECT id FROM tokens WHERE expires_at <= :cutoff
  UNION ALL SELECT id FROM tokens WHERE revoked_at <= :cutoff
  UNION ALL SELECT t.id FROM api_keys k CROSS JOIN tokens t ON t.api_key_id = k.id
    WHERE k.revoked_at > :since AND k.revoked_at <= :cutoff
  UNION ALL SELECT t.id FROM api_keys k CROSS JOIN tokens t ON t.api_key_id = k.id
    WHERE k.expires_at > :since AND k.expires_at <= :cutoff
  UNION ALL SELECT t.id FROM users u CROSS JOIN tokens t
      ON t.user_id = u.id AND t.issued_at < u.tokens_valid_from
    WHERE u.tokens_valid_from > 0 AND u.updated_at > :since AND u.updated_at <= :cutoff
  LIMIT :size`;
