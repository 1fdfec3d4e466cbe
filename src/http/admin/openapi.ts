/**
 * The admin API's OpenAPI 3.1 document, served at `/admin/v1/openapi.json`.
 * tests/admin/openapi_test.ts checks it against the OpenAPI schema and every
 * response the API tests receive against its schemas (openapi_schemas.ts), so the document
 * cannot drift from the code (views.ts writes the same shapes).
 *
 * @module
 */
import { AUDIT_ACTIONS } from "../../auth/audit.ts";
import { ADMIN_SCHEMAS, ref, type Schema, str, time } from "./openapi_schemas.ts";

const ERRORS: Record<string, string> = {
  "400": "Malformed request: a field, a parameter, the JSON body (a repeated key) or the Host",
  "401": "Missing, unknown or revoked operator token",
  "403": "A read-only operator called a route that changes something",
  "404": "No such user, key or path",
  "409": "The change contradicts the stored state (an e-mail taken, a key rotated meanwhile)",
  "413": "Request body over 16 KiB",
  "415": "Request body not application/json",
  "429": "Too many failed sign-ins from this address: retry after Retry-After",
  "503": "The database is busy or unreachable: retry after Retry-After",
};

function errors(codes: string[]): Record<string, unknown> {
  return Object.fromEntries(
    codes.map((code) => [code, { $ref: `#/components/responses/E${code}` }]),
  );
}

const READ_ERRORS = ["400", "401", "404", "429", "503"];
const WRITE_ERRORS = ["400", "401", "403", "404", "409", "413", "415", "429", "503"];

function json(schema: string, description: string): Record<string, unknown> {
  return { description, content: { "application/json": { schema: ref(schema) } } };
}

interface Op {
  summary: string;
  body?: string;
  ok: [status: string, schema: string];
  params?: Schema[];
}

const idParam = (what: string): Schema => ({
  name: "id",
  in: "path",
  required: true,
  description: `The ${what}'s id`,
  schema: { type: "integer", minimum: 1 },
});
const query = (name: string, description: string, schema: Schema = str): Schema => ({
  name,
  in: "query",
  required: false,
  description,
  schema,
});
const limit = query("limit", "Page size, 1 to 200 (default 50)", {
  type: "integer",
  minimum: 1,
  maximum: 200,
});
/** Every list is paged the same way: `limit`, and `cursor` from the previous page's `next`. */
const paging = [
  limit,
  query("cursor", "The previous page's next (opaque); without it, the first page", {
    type: "string",
    pattern: "^[A-Za-z0-9_-]{1,1024}$",
  }),
];

function read(op: Op): Record<string, unknown> {
  return {
    summary: op.summary,
    parameters: op.params ?? [],
    responses: { [op.ok[0]]: json(op.ok[1], op.summary), ...errors(READ_ERRORS) },
  };
}

function write(op: Op): Record<string, unknown> {
  return {
    summary: op.summary,
    description: "Needs an operator with role write; audited with actor operator:NAME.",
    parameters: op.params ?? [],
    ...(op.body === undefined ? {} : {
      requestBody: { required: true, content: { "application/json": { schema: ref(op.body) } } },
    }),
    responses: { [op.ok[0]]: json(op.ok[1], op.summary), ...errors(WRITE_ERRORS) },
  };
}

const user = [idParam("user")];
const key = [idParam("API key")];

/** The document. */
export const ADMIN_OPENAPI = {
  openapi: "3.1.0",
  info: {
    title: "keygate admin API",
    version: "1",
    description:
      "Manage keygate's users, API keys, tokens, login throttle and audit log. Served on the " +
      "admin listener only (--admin on), never on the API port. Authenticate with an operator " +
      "token: Authorization: Bearer kgo_… (deno task admin operator create NAME --role read|write).",
  },
  servers: [{ url: "https://127.0.0.1:9444" }],
  security: [{ operatorToken: [] }],
  paths: {
    "/admin/v1/me": { get: read({ summary: "The signed-in operator", ok: ["200", "Operator"] }) },
    "/admin/v1/stats": {
      get: read({ summary: "Dashboard figures and metric totals", ok: ["200", "Stats"] }),
    },
    "/admin/v1/stats/history": {
      get: read({
        summary: "The dashboard figures of the last hour, one sample a minute (this instance)",
        ok: ["200", "StatsHistory"],
      }),
    },
    "/admin/v1/users": {
      get: read({
        summary: "Users by e-mail, searched and paged",
        ok: ["200", "UserPage"],
        params: [
          query("search", "Only e-mails containing this text"),
          ...paging,
        ],
      }),
      post: write({ summary: "Add a user", body: "NewUser", ok: ["201", "UserDetail"] }),
    },
    "/admin/v1/users/{id}": {
      get: read({ summary: "A user", ok: ["200", "UserDetail"], params: user }),
      delete: write({
        summary: "Delete a user with their keys and tokens (the audit log keeps their history)",
        ok: ["200", "UserDeleted"],
        params: user,
      }),
    },
    "/admin/v1/users/{id}/email": {
      put: write({
        summary: "Change a user's e-mail; keys, tokens and lifetime stay",
        body: "NewEmail",
        ok: ["200", "UserDetail"],
        params: user,
      }),
    },
    "/admin/v1/users/{id}/token-timeout": {
      put: write({
        summary: "Set a user's token lifetime",
        body: "TokenTimeout",
        ok: ["200", "UserDetail"],
        params: user,
      }),
    },
    "/admin/v1/users/{id}/password": {
      put: write({
        summary: "Replace a user's password; ends their tokens",
        body: "Password",
        ok: ["200", "TokensRevoked"],
        params: user,
      }),
    },
    "/admin/v1/users/{id}/disable": {
      post: write({
        summary: "Disable a user; ends their tokens",
        ok: ["200", "UserDetail"],
        params: user,
      }),
    },
    "/admin/v1/users/{id}/enable": {
      post: write({ summary: "Enable a user again", ok: ["200", "UserDetail"], params: user }),
    },
    "/admin/v1/users/{id}/keys": {
      get: read({
        summary: "A user's API keys with last use, by id",
        ok: ["200", "KeyPage"],
        params: [...user, ...paging],
      }),
      post: write({
        summary: "Create an API key (shown once)",
        body: "NewKey",
        ok: ["201", "CreatedKey"],
        params: user,
      }),
    },
    "/admin/v1/users/{id}/tokens": {
      get: read({
        summary: "A user's tokens, newest first (never the tokens themselves)",
        ok: ["200", "TokenPage"],
        params: [
          ...user,
          query("live", "true: only live tokens", { enum: ["true", "false"] }),
          ...paging,
        ],
      }),
    },
    "/admin/v1/users/{id}/tokens/revoke": {
      post: write({
        summary: "End every token of a user issued before a time (default: now)",
        body: "RevokeBefore",
        ok: ["200", "TokensRevoked"],
        params: user,
      }),
    },
    "/admin/v1/keys": {
      get: read({
        summary: "Every API key with its owner and last use (never the keys), by e-mail then id",
        ok: ["200", "KeyPage"],
        params: [
          query(
            "unused",
            'Only keys not revoked and not used for this long, such as "30d" (never used: since creation)',
          ),
          ...paging,
        ],
      }),
    },
    "/admin/v1/keys/{id}": {
      get: read({ summary: "An API key", ok: ["200", "ApiKey"], params: key }),
    },
    "/admin/v1/keys/{id}/rotate": {
      post: write({
        summary:
          "Issue a successor (shown once) with the key's limits and their use; the old key works for the grace",
        body: "Rotation",
        ok: ["201", "RotatedKey"],
        params: key,
      }),
    },
    "/admin/v1/keys/{id}/disable": {
      post: write({ summary: "Suspend a key and its tokens", ok: ["200", "ApiKey"], params: key }),
    },
    "/admin/v1/keys/{id}/enable": {
      post: write({ summary: "Resume a disabled key", ok: ["200", "ApiKey"], params: key }),
    },
    "/admin/v1/keys/{id}/revoke": {
      post: write({
        summary: "Revoke a key and the tokens issued with it",
        ok: ["200", "ApiKeyChange"],
        params: key,
      }),
    },
    "/admin/v1/tokens/{id}/revoke": {
      post: write({
        summary: "Revoke one token by id (revoked: false when unknown or already revoked)",
        ok: ["200", "TokenRevoked"],
        params: [idParam("token")],
      }),
    },
    "/admin/v1/limits": {
      get: read({
        summary: "Every rate and quota set (keys, users, the default)",
        ok: ["200", "LimitList"],
      }),
      post: write({
        summary: "Set a rate or the quota of a key, a user or the default (a rate of the same " +
          "period, or the quota, is replaced)",
        body: "NewLimit",
        ok: ["200", "Limit"],
      }),
    },
    "/admin/v1/limits/{id}": {
      delete: write({
        summary: "Remove a limit",
        ok: ["200", "Limit"],
        params: [idParam("limit")],
      }),
    },
    "/admin/v1/keys/{id}/limits": {
      get: read({
        summary: "The limits in force for a key (its own, else the default's, and its user's) " +
          "and what is left of each",
        ok: ["200", "LimitUsage"],
        params: key,
      }),
    },
    "/admin/v1/users/{id}/limits": {
      get: read({
        summary: "A user's own limits (shared by all its keys) and what is left of each",
        ok: ["200", "LimitUsage"],
        params: user,
      }),
    },
    "/admin/v1/portal/pending": {
      get: read({
        summary: "Portal accounts waiting for an operator (--portal-mode approval), oldest " +
          "sign-up first",
        ok: ["200", "PendingAccountPage"],
        params: paging,
      }),
    },
    "/admin/v1/portal/pending/{id}/approve": {
      post: write({
        summary: "Approve a waiting portal account: it becomes active and its user is mailed " +
          "(409 unless it waits, or with the portal off)",
        ok: ["200", "PortalDecision"],
        params: user,
      }),
    },
    "/admin/v1/portal/pending/{id}/refuse": {
      post: write({
        summary: "Refuse a waiting portal account: the user is deleted, no mail is sent (409 " +
          "unless it waits)",
        ok: ["200", "PortalDecision"],
        params: user,
      }),
    },
    "/admin/v1/throttle": {
      get: read({
        summary: "Live failed-login counters, the longest-blocked first",
        ok: ["200", "ThrottlePage"],
        params: paging,
      }),
    },
    "/admin/v1/throttle/clear": {
      post: write({
        summary: "Forget the counters of a user's keys or of an address",
        body: "ThrottleTarget",
        ok: ["200", "ThrottleCleared"],
      }),
    },
    "/admin/v1/audit": {
      get: read({
        summary: "The audit log, newest first (by time, then id), filtered and paged; a page " +
          "with two or more of actor, action and subject may be short (even empty) and still " +
          "have a next",
        ok: ["200", "AuditPage"],
        params: [
          query("actor", "Exact actor, such as operator:ann or cli:root"),
          query("action", "Exact action, such as key.created", {
            type: "string",
            enum: [...AUDIT_ACTIONS],
          }),
          query("subject", "Exact subject, such as user:a@example.org or api_key:3"),
          query("from", "Entries at or after this time", time),
          query("to", "Entries before this time", time),
          ...paging,
        ],
      }),
    },
    "/admin/v1/openapi.json": {
      get: {
        summary: "This document (no authentication)",
        security: [],
        responses: { "200": { description: "OpenAPI 3.1", content: { "application/json": {} } } },
      },
    },
  },
  components: {
    securitySchemes: {
      operatorToken: {
        type: "http",
        scheme: "bearer",
        description: "An operator token, kgo_ and 40 characters",
      },
    },
    schemas: ADMIN_SCHEMAS,
    responses: Object.fromEntries(
      Object.entries(ERRORS).map(([code, description]) => [`E${code}`, json("Error", description)]),
    ),
  },
};
