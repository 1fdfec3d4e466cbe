/**
 * The admin listener's handler: the admin API under `/admin/v1/` and the web
 * console at `/`, never on the API port.
 *
 * - `/admin/v1/openapi.json` is public; every other API path needs an
 *   operator token (`Authorization: Bearer kgo_…`, src/auth/operators.ts):
 *   401 without a valid one, 429 while the address is blocked, 403 when a
 *   `read` operator calls a route that changes something.
 * - The console is static files (console_assets.ts); it keeps the token in
 *   `sessionStorage` and sends it in that header. No cookie is ever read, so
 *   a cross-site request carries no credential (no CSRF by design), and no
 *   CORS header is sent, so other origins cannot read answers either.
 * - Every response has a strict Content-Security-Policy (scripts and styles
 *   from this origin only, nothing inline), HSTS, nosniff, no-store,
 *   frame-ancestors 'none' and no referrer.
 * - It is the same pipeline as the public listener's (../pipeline.ts: request
 *   ids, the one catch, security headers) with this listener's parts: `Host`
 *   checked as there (../host.ts: 400 `invalid_host`), the same route table
 *   (../route_table.ts) whose `caller` says operator or writer, and its own
 *   renderer and access log.
 * - Every request is logged at info level as one `admin_request` line naming
 *   the operator (name and id), method, path, status and client; a `read`
 *   operator's 403 is audited (`operator.forbidden`), and so is a bulk read
 *   (`operator.bulk_read`, src/auth/read_meter.ts).
 * - Its renderer writes errors as `{"error": {code, message}}` with the status
 *   of src/http/errors.ts's one table; bad input is a 4xx, and only a 5xx is
 *   logged as an error.
 *
 * @module
 */
import { toOperatorRef } from "../../auth/audit.ts";
import type { ChangeDeps } from "../../auth/changes.ts";
import { createOperatorAuth, recordBulkRead, requireWriteRole } from "../../auth/operators.ts";
import { createReadMeter } from "../../auth/read_meter.ts";
import { hasControlCharacter, toPrintable } from "../../formats/printable.ts";
import { redactTarget } from "../../platform/logger.ts";
import type { Operator } from "../../store/store.ts";
import { HttpError } from "../errors.ts";
import { createHostReader, type HostReader, invalidHost } from "../host.ts";
import { splitRequestTarget } from "../paths.ts";
import { createListenerHandler, type Handler } from "../pipeline.ts";
import { createRouteTable, isRouteMatch, methodNotAllowed } from "../route_table.ts";
import { ADMIN_SECURITY_HEADERS } from "../security_headers.ts";
import type { AdminDeps, AdminRoute } from "./admin_router.ts";
import { toJsonError } from "./admin_json.ts";
import { type ConsoleAssets, loadConsoleAssets } from "./console_assets.ts";
import { ADMIN_OPENAPI } from "./openapi.ts";
import { KEY_ROUTES } from "./routes/keys.ts";
import { LIMIT_ROUTES } from "./routes/limits.ts";
import { PORTAL_ROUTES } from "./routes/portal.ts";
import { SYSTEM_ROUTES } from "./routes/system.ts";
import { USER_ROUTES } from "./routes/users.ts";

export type { AdminDeps } from "./admin_router.ts";
export { ADMIN_CSP } from "../security_headers.ts";

/** Where the admin API lives. */
export const ADMIN_API_PREFIX = "/admin/v1/";

/** The admin API's document, public. */
const OPENAPI_PATH = `${ADMIN_API_PREFIX}openapi.json`;

/** Every route of the admin API. */
export const ADMIN_ROUTES: readonly AdminRoute[] = [
  ...SYSTEM_ROUTES,
  ...USER_ROUTES,
  ...KEY_ROUTES,
  ...LIMIT_ROUTES,
  ...PORTAL_ROUTES,
];

/** Reads that are not data (who am I, the dashboard's figures): not counted as bulk reads. */
const UNMETERED_ROUTES: ReadonlySet<string> = new Set([
  "/admin/v1/me",
  "/admin/v1/stats",
  "/admin/v1/stats/history",
]);

/**
 * The request's URL from the checked `Host` (the public listener's rule) and
 * the target as sent, so that a `Host` such as `127.0.0.1/console/app.js?`
 * cannot change the path that is routed.
 *
 * @throws {HttpError} 400 `invalid_host` for a malformed `Host`.
 */
function readAdminUrl(request: Request, readHost: HostReader): URL {
  const host = readHost(request);
  const { rawPath, search } = splitRequestTarget(request.url);
  let url: URL;
  try {
    url = new URL(`https://${host}${rawPath}${search}`);
  } catch {
    throw invalidHost();
  }
  // Every query value ends up in a statement or a log line: none of them holds a control
  // character (PostgreSQL refuses a NUL in text outright, which would otherwise be a 500).
  for (const [name, value] of url.searchParams) {
    if (hasControlCharacter(name) || hasControlCharacter(value)) {
      throw new HttpError(
        400,
        "invalid_request",
        `Invalid query parameter "${
          toPrintable(name.slice(0, 40))
        }": control characters are not allowed`,
      );
    }
  }
  return url;
}

function refuseUnlessGet(method: string): void {
  if (method !== "GET" && method !== "HEAD") {
    throw new HttpError(405, "method_not_allowed", `Method ${method} is not allowed: use GET`, {
      headers: { allow: "GET, HEAD" },
    });
  }
}

/** Options for {@link createAdminHandler}; tests pass other assets. */
export interface AdminHandlerOptions {
  assets?: ConsoleAssets;
}

/** One admin request as the listener handles it: who asked, and which operator it was. */
interface AdminRequest {
  readonly requestId: string;
  readonly client: string;
  operator?: Operator;
}

/** Creates the admin listener's handler. */
export function createAdminHandler(deps: AdminDeps, options: AdminHandlerOptions = {}): Handler {
  const auth = createOperatorAuth({
    store: deps.store,
    clock: deps.clock,
    rule: deps.operatorRule,
  });
  const assets = options.assets ?? loadConsoleAssets();
  const meter = createReadMeter({ clock: deps.clock });
  const openapi = JSON.stringify(ADMIN_OPENAPI);
  const table = createRouteTable(ADMIN_ROUTES, { headAsGet: true });
  const readHost = createHostReader();

  /** The domain's change dependencies for changes made by `operator`. */
  function toChanges(operator: Operator): ChangeDeps {
    return {
      store: deps.store,
      clock: deps.clock,
      actor: toOperatorRef(operator.name),
      noteChange: (entry) =>
        deps.logger.info("admin change", {
          event: "admin_change",
          actor: entry.actor,
          action: entry.action,
          subject: entry.subject,
          ...entry.detail,
        }),
    };
  }

  /** A path outside the API: a file of the console. */
  function serveAsset(path: string, method: string): Response {
    const asset = assets.find(path);
    if (asset === undefined) {
      throw new HttpError(
        404,
        "not_found",
        "Not found: the console is at /, the API at /admin/v1/",
      );
    }
    refuseUnlessGet(method);
    return new Response(method === "HEAD" ? null : asset.body, {
      headers: { "content-type": asset.contentType },
    });
  }

  async function handle(request: Request, seen: AdminRequest): Promise<Response> {
    const url = readAdminUrl(request, readHost);
    const path = url.pathname;
    const method = request.method;
    if (path === OPENAPI_PATH) {
      refuseUnlessGet(method);
      return new Response(openapi, {
        headers: { "content-type": "application/json; charset=utf-8" },
      });
    }
    if (!path.startsWith(ADMIN_API_PREFIX) && path !== "/admin/v1") return serveAsset(path, method);
    // Every other API path is for operators: who asks is known before whether the path exists.
    const operator = await auth.authenticate(request.headers.get("authorization"), seen.client);
    seen.operator = operator;
    const found = table.match(method, path);
    if (found === undefined) throw new HttpError(404, "not_found", "No such admin API path");
    if (!isRouteMatch(found)) throw methodNotAllowed(method, found);
    const { route, params } = found;
    const routeName = `${route.method} ${route.path}`;
    const changes = toChanges(operator);
    if (route.caller === "writer") await requireWriteRole(changes, operator, routeName);
    const response = await route.handle(request, {
      deps,
      operator,
      params,
      url,
      changes,
      accounts: { ...changes, hasher: deps.hasher },
    });
    if (route.caller === "operator" && !UNMETERED_ROUTES.has(route.path) && response.ok) {
      const bulk = meter.count(operator.id);
      if (bulk !== undefined) {
        await recordBulkRead(changes, operator, { ...bulk, route: routeName });
      }
    }
    return response;
  }

  return createListenerHandler<AdminRequest>({
    begin: (_request, info, requestId) => ({
      requestId,
      client: info?.remoteAddr?.hostname ?? "unknown",
    }),
    handle,
    render(error, _thrown, request, seen) {
      if (error.status >= 500) {
        deps.logger.error("admin request failed", {
          request_id: seen.requestId,
          method: request.method,
          error: String(error.cause ?? error),
        });
      }
      return toJsonError(error);
    },
    securityHeaders: ADMIN_SECURITY_HEADERS,
    finish(request, seen, response, seconds) {
      // Every request, read or refused, names its operator (never a token): who read what.
      const { rawPath, search } = splitRequestTarget(request.url);
      deps.logger.info("admin request", {
        event: "admin_request",
        request_id: seen.requestId,
        operator: seen.operator?.name ?? null,
        operator_id: seen.operator?.id ?? null,
        method: request.method.slice(0, 16),
        path: redactTarget(rawPath.slice(0, 200), search.slice(0, 200)),
        status: response.status,
        duration_ms: Math.round(seconds * 100_000) / 100,
        client: seen.client,
      });
    },
  });
}
