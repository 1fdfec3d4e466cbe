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
 * - `Host` is checked as on the public listener (src/http/host.ts): 400
 *   `invalid_host` for anything but a host name and port, before routing.
 * - Every request is logged at info level as one `admin_request` line naming
 *   the operator (name and id), method, path, status and client; a `read`
 *   operator's 403 is audited (`operator.forbidden`), and so is a bulk read
 *   (`operator.bulk_read`, src/auth/read_meter.ts).
 * - This is the one catch of the listener: errors become `{"error": {code,
 *   message}}` with the status of src/http/errors.ts's one table; bad input
 *   is a 4xx, and only a 5xx is logged as an error.
 *
 * @module
 */
import { toOperatorRef } from "../../auth/audit.ts";
import type { ChangeDeps } from "../../auth/changes.ts";
import { createOperatorAuth, recordBulkRead, requireWriteRole } from "../../auth/operators.ts";
import { createReadMeter } from "../../auth/read_meter.ts";
import { redactTarget } from "../../platform/logger.ts";
import type { Operator } from "../../store/store.ts";
import type { ConnectionInfo, Handler } from "../app.ts";
import { drainBody } from "../body.ts";
import { HttpError, toHttpError } from "../errors.ts";
import { invalidHost, readHost } from "../host.ts";
import { splitRequestTarget } from "../paths.ts";
import { hasControlCharacter, toPrintable } from "../../formats/printable.ts";
import { type AdminDeps, type AdminRoute, findAdminRoute } from "./admin_router.ts";
import { toJsonError } from "./admin_json.ts";
import { type ConsoleAssets, loadConsoleAssets } from "./console_assets.ts";
import { ADMIN_OPENAPI } from "./openapi.ts";
import { KEY_ROUTES } from "./routes/keys.ts";
import { SYSTEM_ROUTES } from "./routes/system.ts";
import { USER_ROUTES } from "./routes/users.ts";

export type { AdminDeps } from "./admin_router.ts";

/** Where the admin API lives. */
export const ADMIN_API_PREFIX = "/admin/v1/";

/** Every route of the admin API. */
export const ADMIN_ROUTES: readonly AdminRoute[] = [
  ...SYSTEM_ROUTES,
  ...USER_ROUTES,
  ...KEY_ROUTES,
];

/** Reads that are not data (who am I, the dashboard's figures): not counted as bulk reads. */
const UNMETERED_ROUTES: ReadonlySet<string> = new Set([
  "/admin/v1/me",
  "/admin/v1/stats",
  "/admin/v1/stats/history",
]);

/** The console's policy: everything from this origin, nothing inline, no frames, no plugins. */
export const ADMIN_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS: readonly [string, string][] = [
  ["content-security-policy", ADMIN_CSP],
  ["strict-transport-security", "max-age=31536000; includeSubDomains"],
  ["x-content-type-options", "nosniff"],
  ["cache-control", "no-store"],
  ["referrer-policy", "no-referrer"],
  ["x-frame-options", "DENY"],
  ["cross-origin-opener-policy", "same-origin"],
  ["cross-origin-resource-policy", "same-origin"],
];

/**
 * The request's URL from the checked `Host` (src/http/host.ts, the public
 * listener's rule) and the target as sent, so that a `Host` such as
 * `127.0.0.1/console/app.js?` cannot change the path that is routed.
 *
 * @throws {HttpError} 400 `invalid_host` for a malformed `Host`.
 */
function readAdminUrl(request: Request): URL {
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

/** Options for {@link createAdminHandler}; tests pass other assets. */
export interface AdminHandlerOptions {
  assets?: ConsoleAssets;
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

  /** What a request did, for its access log line. */
  interface Seen {
    operator?: Operator;
  }

  async function route(request: Request, url: URL, client: string, seen: Seen) {
    const path = url.pathname;
    const method = request.method;
    if (path === `${ADMIN_API_PREFIX}openapi.json`) {
      if (method !== "GET" && method !== "HEAD") {
        throw new HttpError(405, "method_not_allowed", `Method ${method} is not allowed: use GET`, {
          headers: { allow: "GET, HEAD" },
        });
      }
      return new Response(openapi, {
        headers: { "content-type": "application/json; charset=utf-8" },
      });
    }
    if (path.startsWith(ADMIN_API_PREFIX) || path === "/admin/v1") {
      const operator = await auth.authenticate(request.headers.get("authorization"), client);
      seen.operator = operator;
      const match = findAdminRoute(ADMIN_ROUTES, method, path);
      if (match === undefined) throw new HttpError(404, "not_found", "No such admin API path");
      const routeName = `${match.route.method} ${match.route.path}`;
      const changes: ChangeDeps = {
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
      if (match.route.write) await requireWriteRole(changes, operator, routeName);
      const response = await match.route.handle(request, {
        deps,
        operator,
        params: match.params,
        url,
        changes,
        accounts: { ...changes, hasher: deps.hasher },
      });
      if (!match.route.write && !UNMETERED_ROUTES.has(match.route.path) && response.ok) {
        const bulk = meter.count(operator.id);
        if (bulk !== undefined) {
          await recordBulkRead(changes, operator, { ...bulk, route: routeName });
        }
      }
      return response;
    }
    const asset = assets.find(path);
    if (asset === undefined) {
      throw new HttpError(
        404,
        "not_found",
        "Not found: the console is at /, the API at /admin/v1/",
      );
    }
    if (method !== "GET" && method !== "HEAD") {
      throw new HttpError(405, "method_not_allowed", `Method ${method} is not allowed: use GET`, {
        headers: { allow: "GET, HEAD" },
      });
    }
    return new Response(method === "HEAD" ? null : asset.body, {
      headers: { "content-type": asset.contentType },
    });
  }

  return async function handleAdmin(request: Request, info?: ConnectionInfo): Promise<Response> {
    const started = performance.now();
    const requestId = crypto.randomUUID().slice(0, 8);
    const client = info?.remoteAddr?.hostname ?? "unknown";
    const seen: Seen = {};
    let response: Response;
    try {
      response = await route(request, readAdminUrl(request), client, seen);
    } catch (thrown) {
      const error = toHttpError(thrown);
      if (error.status >= 500) {
        deps.logger.error("admin request failed", {
          request_id: requestId,
          method: request.method,
          error: String(error.cause ?? error),
        });
      }
      response = toJsonError(error);
    }
    // A body refused unread (401, 403, 404): read it first, or HTTP/2 clients get a stream reset.
    await drainBody(request);
    for (const [name, value] of SECURITY_HEADERS) response.headers.set(name, value);
    response.headers.set("x-request-id", requestId);
    // Every request, read or refused, names its operator (never a token): who read what.
    const { rawPath, search } = splitRequestTarget(request.url);
    deps.logger.info("admin request", {
      event: "admin_request",
      request_id: requestId,
      operator: seen.operator?.name ?? null,
      operator_id: seen.operator?.id ?? null,
      method: request.method.slice(0, 16),
      path: redactTarget(rawPath.slice(0, 200), search.slice(0, 200)),
      status: response.status,
      duration_ms: Math.round((performance.now() - started) * 100) / 100,
      client,
    });
    return response;
  };
}
