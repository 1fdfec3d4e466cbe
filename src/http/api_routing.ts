/**
 * Where the public listener sends a request once its path is canonical: a
 * secure path to the gate first (API key and token, synchronous on a cache
 * hit) and then the route table, any other path to the table, and a path no
 * row has to the API-key check and the upstream (if any), else 404.
 *
 * @module
 */
import type { Gate, Principal } from "../auth/gate.ts";
import type { RequestContext } from "./context.ts";
import { HttpError } from "./errors.ts";
import type { AdmitLimits } from "./limits.ts";
import { parseRequestPath, type RequestPath } from "./paths.ts";
import type { HandlerContext } from "./request_context.ts";
import { isRouteMatch, methodNotAllowed, type Route, type RouteTable } from "./route_table.ts";
import { type Forward, isKeygatePath } from "./upstream.ts";

/** What {@link createApiRouting} needs. */
export interface ApiRoutingDeps {
  table: RouteTable<RequestContext>;
  gate: Pick<Gate, "authenticateToken" | "authenticateKey">;
  /** The upstream, for authenticated requests no row answers. */
  forward?: Forward;
  /** The key's and user's limits, checked once the caller is known (none: no limits). */
  admitLimits?: AdmitLimits;
}

/** Routes one request with a canonical path. */
export type ApiRouting = (
  request: Request,
  context: HandlerContext,
  target: RequestPath,
) => Response | Promise<Response>;

/**
 * Checks that every row's caller agrees with its path: `token` exactly on secure paths, which
 * the gate guards before the table is read.
 *
 * @throws {TypeError} at start-up otherwise.
 */
export function checkCallers(routes: readonly Route<RequestContext>[]): void {
  for (const route of routes) {
    if (parseRequestPath(route.path).secure !== (route.caller === "token")) {
      throw new TypeError(`Route ${route.method} ${route.path} is for ${route.caller} callers`);
    }
  }
}

/** Creates the public listener's routing. */
export function createApiRouting(deps: ApiRoutingDeps): ApiRouting {
  const { table, gate, forward } = deps;
  const admitLimits = deps.admitLimits ?? (() => {});

  /** A secure request's limits, then its row (synchronous while the key's units last). */
  function admitSecure(request: Request, path: string, context: HandlerContext, p: Principal) {
    context.apiKeyId = p.apiKeyId;
    context.principal = p;
    const admitted = admitLimits(context, p);
    if (admitted instanceof Promise) {
      return admitted.then(() => dispatchSecure(request, path, context, p));
    }
    return dispatchSecure(request, path, context, p);
  }

  function dispatchSecure(request: Request, path: string, context: HandlerContext, p: Principal) {
    const found = table.match(request.method, path);
    if (isRouteMatch(found)) return found.route.handle(request, context);
    if (found !== undefined) throw methodNotAllowed(request.method, found);
    const forwarded = forward && !isKeygatePath(path) ? forward(request, context, p) : undefined;
    if (forwarded) return forwarded;
    throw new HttpError(404, "not_found", "No secure endpoint at this path");
  }

  /** A path no row has: the API key first, then the upstream (if any), else 404. */
  async function routeUnknown(request: Request, path: string, context: HandlerContext) {
    const holder = await gate.authenticateKey(request, context);
    context.apiKeyId = holder.apiKeyId;
    if (forward && !isKeygatePath(path)) {
      await admitLimits(context, holder);
      return forward(request, context, holder);
    }
    throw new HttpError(404, "not_found", "No endpoint at this path");
  }

  async function callWithKey(
    request: Request,
    context: HandlerContext,
    route: Route<RequestContext>,
  ) {
    context.apiKeyId = (await gate.authenticateKey(request, context)).apiKeyId;
    return await route.handle(request, context);
  }

  return function route(request, context, { path, secure }) {
    if (secure) {
      const principal = gate.authenticateToken(request, context);
      if (principal instanceof Promise) {
        return principal.then((found) => admitSecure(request, path, context, found));
      }
      return admitSecure(request, path, context, principal);
    }
    const found = table.match(request.method, path);
    if (found === undefined) return routeUnknown(request, path, context);
    if (!isRouteMatch(found)) throw methodNotAllowed(request.method, found);
    // `anyone` and `client` rows check their own credentials, if any.
    return found.route.caller === "api_key"
      ? callWithKey(request, context, found.route)
      : found.route.handle(request, context);
  };
}
