/**
 * `/admin/v1/me`, `/stats`, `/throttle` and `/audit`: who is signed in, the
 * dashboard's figures, the failed-login counters, and the audit log with
 * filters and paging.
 *
 * @module
 */
import { clearThrottle, listThrottleCounters, readAdminStats } from "../../../auth/admin_tasks.ts";
import { STATS_INTERVAL_MS } from "../../../auth/stats_history.ts";
import type { AdminRoute } from "../admin_router.ts";
import {
  allowFields,
  readJsonObject,
  requiredString,
  toInstant,
  toJson,
  toLimit,
} from "../admin_json.ts";
import { readCursor, toCursorText, toPage } from "../cursor.ts";
import { toAuditView, toOperatorView, toStatsView, toThrottleView } from "../views.ts";

function toFilter(url: URL, name: string): string | undefined {
  const value = url.searchParams.get(name);
  return value === null || value === "" ? undefined : value.slice(0, 300);
}

export const SYSTEM_ROUTES: readonly AdminRoute[] = [
  {
    method: "GET",
    path: "/admin/v1/me",
    caller: "operator",
    // deno-lint-ignore require-await
    async handle(_request, { operator }) {
      return toJson(toOperatorView(operator));
    },
  },
  {
    method: "GET",
    path: "/admin/v1/stats",
    caller: "operator",
    async handle(_request, { deps }) {
      const stats = await readAdminStats({
        store: deps.store,
        now: deps.clock.now(),
        readCounters: deps.readCounters,
      });
      return toJson(toStatsView(stats));
    },
  },
  {
    method: "GET",
    path: "/admin/v1/stats/history",
    caller: "operator",
    // deno-lint-ignore require-await
    async handle(_request, { deps }) {
      return toJson({
        interval_seconds: (deps.history?.intervalMs ?? STATS_INTERVAL_MS) / 1000,
        samples: (deps.history?.list() ?? []).map(toStatsView),
      });
    },
  },
  {
    method: "GET",
    path: "/admin/v1/throttle",
    caller: "operator",
    async handle(_request, { deps, url }) {
      const limit = toLimit(url);
      const cursor = readCursor(url, ["number", "string"]);
      const counters = await listThrottleCounters(deps.store, {
        now: deps.clock.now(),
        after: cursor && { blockedUntil: cursor[0] as number, subject: cursor[1] as string },
        limit: limit + 1,
      });
      const page = toPage(counters, limit, (row) => [row.blockedUntil, row.subject]);
      return toJson({ counters: page.rows.map(toThrottleView), next: page.next });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/throttle/clear",
    caller: "writer",
    async handle(request, { changes }) {
      const body = await readJsonObject(request);
      allowFields(body, ["target"]);
      const { cleared } = await clearThrottle(changes, requiredString(body, "target", 254));
      return toJson({ cleared });
    },
  },
  {
    method: "GET",
    path: "/admin/v1/audit",
    caller: "operator",
    async handle(_request, { deps, url }) {
      const limit = toLimit(url);
      const from = toFilter(url, "from");
      const to = toFilter(url, "to");
      const cursor = readCursor(url, ["number", "number"]);
      const page = await deps.store.searchAuditPage({
        actor: toFilter(url, "actor"),
        action: toFilter(url, "action"),
        subject: toFilter(url, "subject"),
        from: from === undefined ? undefined : toInstant(from, "from"),
        to: to === undefined ? undefined : toInstant(to, "to"),
        cursor: cursor && { at: cursor[0] as number, id: cursor[1] as number },
        limit,
      });
      return toJson({
        entries: page.entries.map(toAuditView),
        next: page.next === undefined ? null : toCursorText([page.next.at, page.next.id]),
      });
    },
  },
];
