/**
 * How the admin API shows stored rows: snake_case JSON with ISO 8601 times,
 * and never a secret or a digest (no password hash, key hash or token).
 * openapi.ts declares the same shapes.
 *
 * @module
 */
import type { AdminStats, ThrottleCounter } from "../../auth/admin_tasks.ts";
import { toKeyStatus } from "../../auth/key_status.ts";
import type { PendingAccount } from "../../auth/portal/approval.ts";
import type {
  ApiKey,
  ApiKeyListing,
  AuditRecord,
  Operator,
  TokenListing,
  User,
} from "../../store/store.ts";
import { toIso } from "./admin_json.ts";

export function toUserView(user: User) {
  return {
    id: user.id,
    email: user.email,
    status: user.disabled ? "disabled" : "enabled",
    token_timeout_seconds: user.tokenTimeoutSeconds,
    created_at: toIso(user.createdAt),
    updated_at: toIso(user.updatedAt),
    tokens_valid_from: user.tokensValidFrom === 0 ? null : toIso(user.tokensValidFrom),
  };
}

/** A portal account that waits for an operator (src/auth/portal/approval.ts). */
export function toPendingAccountView(account: PendingAccount) {
  return {
    id: account.user.id,
    email: account.user.email,
    signed_up_at: toIso(account.signedUpAt),
  };
}

export function toKeyView(key: ApiKey | ApiKeyListing, now: number) {
  return {
    id: key.id,
    user_id: key.userId,
    ...("email" in key ? { email: key.email } : {}),
    prefix: key.prefix,
    label: key.label,
    status: toKeyStatus(key, now),
    introspect: key.introspect,
    created_at: toIso(key.createdAt),
    expires_at: toIso(key.expiresAt),
    revoked_at: toIso(key.revokedAt),
    disabled_at: toIso(key.disabledAt),
    replaced_by: key.replacedBy,
    last_used_at: toIso(key.lastUsedAt),
    last_used_from: key.lastUsedFrom,
    use_count: key.useCount,
  };
}

export function toTokenView(token: TokenListing) {
  return {
    id: token.id,
    api_key_id: token.apiKeyId,
    issued_at: toIso(token.issuedAt),
    expires_at: toIso(token.expiresAt),
    revoked_at: toIso(token.revokedAt),
    live: token.live,
  };
}

export function toAuditView(record: AuditRecord) {
  return {
    id: record.id,
    at: toIso(record.at),
    actor: record.actor,
    action: record.action,
    subject: record.subject,
    detail: record.detail,
  };
}

export function toOperatorView(operator: Operator) {
  return { name: operator.name, role: operator.role };
}

export function toThrottleView(counter: ThrottleCounter) {
  return {
    subject: counter.subject,
    email: counter.email ?? null,
    failures: counter.failures,
    blocked: counter.blocked,
    blocked_until: counter.blocked ? toIso(counter.blockedUntil) : null,
    last_failure_at: toIso(counter.lastFailureAt),
  };
}

export function toStatsView(stats: AdminStats) {
  return {
    at: toIso(stats.at),
    users: stats.users,
    api_keys: stats.apiKeys,
    live_tokens: stats.liveTokens,
    throttled_subjects: stats.throttledSubjects,
    counters: {
      tokens_issued: stats.counters.tokensIssued,
      login_failures: stats.counters.loginFailures,
      throttled_requests: stats.counters.throttled,
      secure_allowed: stats.counters.secureAllowed,
      secure_denied: stats.counters.secureDenied,
    },
  };
}
