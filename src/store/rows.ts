/**
 * Stored rows (snake_case, flags as 0/1: both backends name and type their columns alike) to the
 * store's row types (camelCase). Used by every backend, inside src/store/ only. Not the audit
 * row: its detail is JSON text on SQLite and jsonb on PostgreSQL, so each backend maps its own.
 *
 * @module
 */
import { MAX_TIME_MS } from "../platform/clock.ts";
import type { StoredCounter } from "./limit_lease.ts";
import type {
  ApiKey,
  LimitKind,
  LimitPeriod,
  LimitRule,
  LimitScope,
  LoginFailures,
  Operator,
  OperatorRole,
  PortalAccount,
  PortalAccountState,
  PortalSessionUser,
  TokenRow,
  TokenStatus,
  User,
} from "./store.ts";

/**
 * The `endedSince` of a token batch that looks at every key and user that ever ended
 * (`TokenBatch.endedSince` absent): before any time a row holds.
 */
export const EVER = Number.MIN_SAFE_INTEGER;

/** A row as a driver returns it. */
export type Row = Record<string, unknown>;

/**
 * An expiry as stored, at most {@link MAX_TIME_MS}: a later one (written before
 * durations were capped, or by hand) means "never" in practice, and must not
 * break whatever turns it into a date. The SQLite backend also caps it in SQL,
 * since its driver cannot read integers beyond 2^53.
 */
export function toExpiry(value: unknown): number {
  return Math.min(value as number, MAX_TIME_MS);
}

/** {@link toExpiry}, keeping `null` (no expiry). */
export function toExpiryOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : toExpiry(value);
}

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

/** A portal account from the columns `prefix` + `user_id`, `state`, `created_at`, `user_held`. */
export function toPortalAccount(row: Row, prefix = ""): PortalAccount {
  return {
    userId: Number(row[`${prefix}user_id`]),
    state: row[`${prefix}state`] as PortalAccountState,
    createdAt: Number(row[`${prefix}created_at`]),
    userHeld: Number(row[`${prefix}user_held`]) === 1,
  };
}

/**
 * A session's user row (`users.*`) with the session's `s_created_at`, `s_expires_at` and the
 * account's `a_…` columns (null without an account).
 */
export function toPortalSessionUser(row: Row): PortalSessionUser {
  const user = toUser(row);
  return {
    session: {
      userId: user.id,
      createdAt: Number(row.s_created_at),
      expiresAt: Number(row.s_expires_at),
    },
    user,
    ...(row.a_user_id == null ? {} : { account: toPortalAccount(row, "a_") }),
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
    expiresAt: toExpiryOrNull(row.expires_at),
    disabledAt: row.disabled_at as number | null,
    replacedBy: row.replaced_by as number | null,
    lastUsedAt: row.last_used_at as number | null,
    lastUsedFrom: row.last_used_from as string | null,
    useCount: row.use_count as number,
    introspect: row.introspect === 1,
  };
}

/** The facts of a token row joined with its user, as both token lookups return them. */
export function toTokenFacts(row: Row): Omit<TokenStatus, "live"> {
  return {
    tokenId: row.token_id as number,
    userId: row.user_id as number,
    email: row.email as string,
    apiKeyId: row.api_key_id as number,
    issuedAt: row.issued_at as number,
    expiresAt: toExpiry(row.expires_at),
  };
}

/** A token row for listings (`id, api_key_id, issued_at, expires_at, revoked_at`). */
export function toTokenRow(row: Row): TokenRow {
  return {
    id: row.id as number,
    apiKeyId: row.api_key_id as number,
    issuedAt: row.issued_at as number,
    expiresAt: toExpiry(row.expires_at),
    revokedAt: row.revoked_at as number | null,
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

export function toOperator(row: Row): Operator {
  return {
    id: row.id as number,
    name: row.name as string,
    role: row.role as OperatorRole,
    prefix: row.prefix as string,
    createdAt: row.created_at as number,
    revokedAt: row.revoked_at as number | null,
  };
}

/** A limit counter as both backends store it (`limit_usage`). */
export function toStoredCounter(row: Row): StoredCounter {
  return {
    windowStart: row.window_start as number,
    used: row.used as number,
    nextUsed: row.next_used as number,
    nextStart: row.next_start as number,
  };
}

export function toLimitRule(row: Row): LimitRule {
  return {
    id: row.id as number,
    scope: row.scope as LimitScope,
    subjectId: (row.api_key_id ?? row.user_id ?? null) as number | null,
    kind: row.kind as LimitKind,
    max: row.max as number,
    period: row.period as LimitPeriod,
    createdAt: row.created_at as number,
    updatedAt: row.updated_at as number,
  };
}
