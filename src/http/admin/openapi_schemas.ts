/**
 * The schemas of the admin API's OpenAPI document (openapi.ts): the JSON
 * shapes views.ts writes and the request bodies the routes read.
 *
 * @module
 */

/** A JSON Schema, as the document writes it. */
export type Schema = Record<string, unknown>;

export const str = { type: "string" };
const int = { type: "integer" };
const bool = { type: "boolean" };
export const time = { type: "string", format: "date-time" };
const nullable = (schema: Schema): Schema => ({ oneOf: [schema, { type: "null" }] });
export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const object = (properties: Record<string, Schema>, optional: string[] = []): Schema => ({
  type: "object",
  required: Object.keys(properties).filter((name) => !optional.includes(name)),
  properties,
  additionalProperties: false,
});

const USER: Record<string, Schema> = {
  id: int,
  email: str,
  status: { enum: ["enabled", "disabled"] },
  token_timeout_seconds: nullable(int),
  created_at: time,
  updated_at: time,
  tokens_valid_from: nullable(time),
};

const API_KEY: Record<string, Schema> = {
  id: int,
  user_id: int,
  email: str,
  prefix: {
    ...str,
    description: "The key's first 8 characters; the key itself is never shown again",
  },
  label: str,
  status: { enum: ["active", "disabled", "expired", "revoked", "user_disabled"] },
  introspect: bool,
  created_at: time,
  expires_at: nullable(time),
  revoked_at: nullable(time),
  disabled_at: nullable(time),
  replaced_by: nullable(int),
  last_used_at: nullable(time),
  last_used_from: nullable(str),
  use_count: int,
};

/** The document's `components.schemas`. */
export const ADMIN_SCHEMAS: Record<string, Schema> = {
  Error: object({
    error: object({
      code: { ...str, description: "A stable machine word: invalid_token, forbidden, …" },
      message: str,
    }),
  }),
  Operator: object({ name: str, role: { enum: ["read", "write"] } }),
  User: object(USER),
  UserDetail: object(
    { ...USER, effective_token_timeout_seconds: int, tokens_revoked: int },
    ["tokens_revoked"],
  ),
  UserPage: object({ users: { type: "array", items: ref("User") }, next: nullable(str) }),
  ApiKey: object(API_KEY, ["email"]),
  ApiKeyChange: object({ ...API_KEY, tokens_revoked: int }, ["email", "tokens_revoked"]),
  KeyPage: object({ keys: { type: "array", items: ref("ApiKey") }, next: nullable(str) }),
  CreatedKey: object({
    key: ref("ApiKey"),
    api_key: { ...str, description: "The new key, shown this once" },
  }),
  RotatedKey: object({
    key: ref("ApiKey"),
    api_key: { ...str, description: "The successor key, shown this once" },
    old_key: ref("ApiKey"),
    old_key_until: time,
  }),
  Token: object({
    id: int,
    api_key_id: int,
    issued_at: time,
    expires_at: time,
    revoked_at: nullable(time),
    live: bool,
  }),
  TokenPage: object({ tokens: { type: "array", items: ref("Token") }, next: nullable(str) }),
  TokenRevoked: object({ id: int, revoked: bool }),
  TokensRevoked: object({ tokens_revoked: int }),
  AuditEntry: object({
    id: int,
    at: time,
    actor: str,
    action: str,
    subject: str,
    detail: { type: "object", additionalProperties: { type: ["string", "number", "null"] } },
  }),
  AuditPage: object({ entries: { type: "array", items: ref("AuditEntry") }, next: nullable(str) }),
  ThrottleCounter: object({
    subject: str,
    email: nullable(str),
    failures: int,
    blocked: bool,
    blocked_until: nullable(time),
    last_failure_at: time,
  }),
  ThrottlePage: object({
    counters: { type: "array", items: ref("ThrottleCounter") },
    next: nullable(str),
  }),
  ThrottleCleared: object({ cleared: int }),
  Stats: object({
    at: time,
    users: int,
    api_keys: int,
    live_tokens: int,
    throttled_subjects: int,
    counters: object({
      tokens_issued: { type: "number" },
      login_failures: { type: "number" },
      throttled_requests: { type: "number" },
      secure_allowed: { type: "number" },
      secure_denied: { type: "number" },
    }),
  }),
  StatsHistory: object({
    interval_seconds: int,
    samples: { type: "array", items: ref("Stats"), description: "Oldest first" },
  }),
  NewUser: object({
    email: str,
    password: str,
    token_timeout: { ...nullable(str), description: 'A duration such as "10h"; null: the default' },
  }, ["token_timeout"]),
  TokenTimeout: object({ token_timeout: nullable(str) }),
  NewEmail: object({ email: str }),
  UserDeleted: object({ api_keys_deleted: int, tokens_deleted: int }),
  Password: object({ password: str }),
  NewKey: object({
    label: str,
    expires_in: { ...str, description: 'A duration such as "30d"' },
    introspect: bool,
  }, ["label", "expires_in", "introspect"]),
  Rotation: object({
    grace: { ...str, description: 'How long the old key keeps working: "24h" (default) or "0"' },
  }, ["grace"]),
  RevokeBefore: object({ before: time }, ["before"]),
  Limit: object({
    id: int,
    applies_to: { enum: ["key", "user", "default"] },
    subject_id: { ...nullable(int), description: "The key's or user's id; null for the default" },
    kind: { enum: ["rate", "quota"] },
    limit: { ...str, description: 'As set: "10/second", "100000/month", "5000" (never refilled)' },
    max: int,
    period: { enum: ["second", "minute", "hour", "day", "month", "none"] },
    created_at: time,
    updated_at: time,
  }),
  LimitList: object({ limits: { type: "array", items: ref("Limit") } }),
  LimitUsage: object({
    limits: {
      type: "array",
      items: object({
        limit_id: int,
        applies_to: { enum: ["key", "user", "default"] },
        kind: { enum: ["rate", "quota"] },
        limit: str,
        used: {
          ...int,
          description: "Units leased by servers in the current window (spent, or held for at " +
            "most about a second)",
        },
        remaining: int,
        resets_at: { ...nullable(time), description: "null: a quota never refilled" },
      }),
    },
    counts_against_key: {
      ...nullable(int),
      description: "A key's only: null, or for a rotated key the last key of its rotation " +
        "chain, whose limits (moved there by the rotation) it counts against until it ends",
    },
  }, ["counts_against_key"]),
  NewLimit: object({
    applies_to: { enum: ["key", "user", "default"] },
    subject_id: { ...int, description: "The key's or user's id (not for the default)" },
    kind: { enum: ["rate", "quota"] },
    limit: {
      ...str,
      description: "A rate: COUNT/PERIOD (second, minute, hour, day); a quota: COUNT (never " +
        "refilled) or COUNT/PERIOD (hour, day, month)",
    },
  }, ["subject_id"]),
  PendingAccountPage: object({
    accounts: {
      type: "array",
      items: object({
        id: { ...int, description: "The user's id" },
        email: str,
        signed_up_at: time,
      }),
    },
    next: nullable(str),
  }),
  PortalDecision: object({ id: int, status: { enum: ["approved", "refused"] } }),
  ThrottleTarget: object({
    target: {
      ...str,
      description: "An e-mail, a client address (both of its counters), or a counter's subject " +
        "as listed (client:ADDRESS, admin:ADDRESS)",
    },
  }),
};
