/**
 * `/admin/v1/limits` and a key's or user's `/limits`: the rates and quotas set (all), setting
 * and removing one, and the limits in force for a key or a user with what is left of them.
 * Each change calls one domain function (src/auth/limits.ts).
 *
 * @module
 */
import { AuthError } from "../../../auth/errors.ts";
import {
  formatLimitValue,
  type LimitReport,
  type LimitTarget,
  listLimitsOf,
  parseLimitValue,
  readKeyLimitUsage,
  readLimitUsage,
  removeLimitById,
  setLimit,
} from "../../../auth/limits.ts";
import type { LimitKind, LimitRule } from "../../../store/store.ts";
import type { AdminContext, AdminRoute } from "../admin_router.ts";
import {
  allowFields,
  type JsonObject,
  readJsonObject,
  requiredString,
  toIso,
  toJson,
  toRowId,
} from "../admin_json.ts";
import { findUserParam } from "./users.ts";

function toLimitView(rule: LimitRule) {
  return {
    id: rule.id,
    applies_to: rule.scope,
    subject_id: rule.subjectId,
    kind: rule.kind,
    limit: formatLimitValue(rule),
    max: rule.max,
    period: rule.period,
    created_at: toIso(rule.createdAt),
    updated_at: toIso(rule.updatedAt),
  };
}

function toUsageView(report: LimitReport) {
  return {
    limit_id: report.rule.id,
    applies_to: report.rule.scope,
    kind: report.rule.kind,
    limit: formatLimitValue(report.rule),
    used: report.used,
    remaining: report.remaining,
    resets_at: Number.isFinite(report.window.end) ? toIso(report.window.end) : null,
  };
}

/** The target a new limit's body names: `applies_to` and, for a key or user, `subject_id`. */
async function readTarget(body: JsonObject, context: AdminContext): Promise<LimitTarget> {
  const scope = requiredString(body, "applies_to", 16);
  if (scope === "default") {
    if (body.subject_id !== undefined) {
      throw new AuthError("invalid_request", 'Invalid "subject_id": the default has none');
    }
    return { scope };
  }
  if (scope !== "key" && scope !== "user") {
    throw new AuthError("invalid_request", 'Invalid "applies_to": expected key, user or default');
  }
  const id = body.subject_id;
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 1) {
    throw new AuthError("invalid_request", 'Invalid "subject_id": expected a positive integer');
  }
  const { store } = context.deps;
  if (scope === "key") {
    const key = await store.findApiKeyById(id);
    if (key === undefined) throw new AuthError("not_found", `No API key ${id}`);
    return { scope, key };
  }
  const user = await store.findUserById(id);
  if (user === undefined) throw new AuthError("not_found", `No user ${id}`);
  return { scope, user };
}

export const LIMIT_ROUTES: readonly AdminRoute[] = [
  {
    method: "GET",
    path: "/admin/v1/limits",
    caller: "operator",
    async handle(_request, { deps }) {
      return toJson({ limits: (await listLimitsOf(deps.store)).map(toLimitView) });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/limits",
    caller: "writer",
    async handle(request, context) {
      const body = await readJsonObject(request);
      allowFields(body, ["applies_to", "subject_id", "kind", "limit"]);
      const kind = requiredString(body, "kind", 8);
      if (kind !== "rate" && kind !== "quota") {
        throw new AuthError("invalid_request", 'Invalid "kind": expected rate or quota');
      }
      const value = parseLimitValue(kind as LimitKind, requiredString(body, "limit", 64));
      const target = await readTarget(body, context);
      return toJson(toLimitView(await setLimit(context.changes, target, value)));
    },
  },
  {
    method: "DELETE",
    path: "/admin/v1/limits/:id",
    caller: "writer",
    async handle(_request, context) {
      const id = toRowId(context.params.id, "limit");
      return toJson(toLimitView(await removeLimitById(context.changes, id)));
    },
  },
  {
    method: "GET",
    path: "/admin/v1/keys/:id/limits",
    caller: "operator",
    async handle(_request, context) {
      const id = toRowId(context.params.id, "API key");
      const key = await context.deps.store.findApiKeyById(id);
      if (key === undefined) throw new AuthError("not_found", `No API key ${id}`);
      const report = await readKeyLimitUsage(context.deps.store, context.deps.clock.now(), key);
      return toJson({
        limits: report.limits.map(toUsageView),
        counts_against_key: report.countsAgainst ?? null,
      });
    },
  },
  {
    method: "GET",
    path: "/admin/v1/users/:id/limits",
    caller: "operator",
    async handle(_request, context) {
      const user = await findUserParam(context);
      const usage = await readLimitUsage(context.deps.store, context.deps.clock.now(), {
        userId: user.id,
      });
      return toJson({ limits: usage.map(toUsageView) });
    },
  },
];
