/**
 * The public API's handler: the listener pipeline (pipeline.ts: request id,
 * the one catch, security headers) composed with this listener's pieces:
 * `Host` (host.ts), the canonical path (paths.ts), the response format
 * (negotiate.ts), proxy mode (proxy_trust.ts), CORS (cors.ts), the health
 * checks (health.ts), the route table (route_table.ts) of routes/, the gate
 * for secure paths, the upstream, and the request log (request_log.ts).
 *
 * @module
 */
import { createGate, type Principal } from "../auth/gate.ts";
import { createMetrics } from "../platform/metrics.ts";
import type { AppDeps, RequestContext } from "./context.ts";
import { CORS_METHODS, CORS_METHODS_ALL, createCors } from "./cors.ts";
import { HttpError, toErrorResponse } from "./errors.ts";
import { createHealthCheck, HEALTH_PATH, isHealthPath, READY_PATH } from "./health.ts";
import { createHostReader } from "./host.ts";
import { negotiateResponseFormat } from "./negotiate.ts";
import { toOAuthErrorResponse } from "./oauth_client.ts";
import {
  createPathParser,
  findSuffixFormat,
  parseRequestPath,
  splitRequestTarget,
} from "./paths.ts";
import { createListenerHandler, type Handler } from "./pipeline.ts";
import { createProxyTrust } from "./proxy_trust.ts";
import { HandlerContext } from "./request_context.ts";
import { createRequestLog } from "./request_log.ts";
import { createRouteTable, isRouteMatch, methodNotAllowed, type Route } from "./route_table.ts";
import { API_SECURITY_HEADERS } from "./security_headers.ts";
import {
  createBackendRoutes,
  INTROSPECT_PATH,
  REVOKE_PATH,
  VERIFY_PATH,
} from "./routes/backend.ts";
import { createSecureRoutes, CURRENT_TOKEN_PATH } from "./routes/secure.ts";
import { createTokenRoutes, TOKENS_PATH } from "./routes/tokens.ts";
import { createUpstreamProxy, isKeygatePath } from "./upstream.ts";

export type { ConnectionInfo, Handler } from "./pipeline.ts";

/** Route patterns used as metric labels; add new endpoints here. */
const ROUTE_LABELS: ReadonlySet<string> = new Set([
  TOKENS_PATH,
  CURRENT_TOKEN_PATH,
  VERIFY_PATH,
  INTROSPECT_PATH,
  REVOKE_PATH,
  HEALTH_PATH,
  READY_PATH,
]);

/**
 * Every row's caller agrees with its path: `token` exactly on secure paths, which the gate
 * guards before the table is read. @throws {TypeError} at start-up otherwise.
 */
function checkCallers(routes: readonly Route<RequestContext>[]): void {
  for (const route of routes) {
    if (parseRequestPath(route.path).secure !== (route.caller === "token")) {
      throw new TypeError(`Route ${route.method} ${route.path} is for ${route.caller} callers`);
    }
  }
}

/** Creates the public API's handler from its dependencies. */
export function createHandler(deps: AppDeps): Handler {
  const metrics = deps.metrics ?? createMetrics();
  const { store, logger } = deps;
  const gate = createGate({ ...deps, metrics });
  const routes = [
    ...createTokenRoutes({ ...deps, metrics }),
    ...createBackendRoutes({ ...deps, gate }),
    ...createSecureRoutes(deps),
  ];
  checkCallers(routes);
  const table = createRouteTable(routes, { alsoAllowed: ["OPTIONS"] });
  const forward = deps.upstream && createUpstreamProxy(deps.upstream, { logger });
  const readHost = createHostReader();
  const readPath = createPathParser({ allowUnicode: deps.unicodePaths ?? false });
  const acceptProxied = deps.proxy && createProxyTrust(deps.proxy);
  const answerHealth = createHealthCheck({ store, logger, metrics });
  const cors = createCors({
    origins: deps.corsOrigins ?? ["*"],
    methods: deps.upstream || deps.secureRoutes ? CORS_METHODS_ALL : CORS_METHODS,
  });
  const log = createRequestLog({ logger, metrics, routeLabels: ROUTE_LABELS });
  const listenerScheme = deps.scheme ?? "https";

  /** A request on a secure path: the gate first (synchronous on a cache hit), then the table. */
  function routeSecure(request: Request, path: string, context: HandlerContext) {
    const principal = gate.authenticateToken(request, context);
    if (principal instanceof Promise) {
      return principal.then((found) => dispatchSecure(request, path, context, found));
    }
    return dispatchSecure(request, path, context, principal);
  }

  function dispatchSecure(request: Request, path: string, context: HandlerContext, p: Principal) {
    context.apiKeyId = p.apiKeyId;
    context.principal = p;
    const found = table.match(request.method, path);
    if (isRouteMatch(found)) return found.route.handle(request, context);
    if (found !== undefined) throw methodNotAllowed(request.method, found);
    const forwarded = forward && !isKeygatePath(path) ? forward(request, context, p) : undefined;
    if (forwarded) return forwarded;
    throw new HttpError(404, "not_found", "No secure endpoint at this path");
  }

  /** Any other path: the API key first, then the upstream (if any), else 404. */
  async function routeUnknown(request: Request, path: string, context: HandlerContext) {
    const holder = await gate.authenticateKey(request, context);
    context.apiKeyId = holder.apiKeyId;
    if (forward && !isKeygatePath(path)) return forward(request, context, holder);
    throw new HttpError(404, "not_found", "No endpoint at this path");
  }

  async function routeWithKey(
    request: Request,
    context: HandlerContext,
    route: Route<RequestContext>,
  ) {
    context.apiKeyId = (await gate.authenticateKey(request, context)).apiKeyId;
    return await route.handle(request, context);
  }

  function handle(request: Request, context: HandlerContext): Response | Promise<Response> {
    context.host = readHost(request);
    const target = readPath(context.rawPath);
    context.target = target;
    const format = target.format ?? context.accepted;
    if (format === undefined) {
      throw new HttpError(
        406,
        "not_acceptable",
        "Not acceptable: this API answers in application/json or application/xml",
      );
    }
    context.format = format;
    const { path, secure } = target;
    const isHealth = isHealthPath(path);
    if (acceptProxied && !isHealth) acceptProxied(request, context);
    // Forward-auth asks about OPTIONS requests too, so it is never a preflight.
    if (request.method === "OPTIONS" && path !== VERIFY_PATH) return cors.preflight(request);
    if (isHealth) return answerHealth(path, request.method);
    if (secure) return routeSecure(request, path, context);
    const found = table.match(request.method, path);
    if (found === undefined) return routeUnknown(request, path, context);
    if (!isRouteMatch(found)) throw methodNotAllowed(request.method, found);
    const { route } = found;
    return route.caller === "api_key"
      ? routeWithKey(request, context, route)
      : route.handle(request, context);
  }

  return createListenerHandler<HandlerContext>({
    begin(request, info, requestId) {
      const { rawPath, search } = splitRequestTarget(request.url);
      return new HandlerContext({
        requestId,
        // Nothing the client sent has been read yet: Host and the path are read in `handle`.
        accepted: negotiateResponseFormat(request.headers.get("accept")),
        peerAddress: info?.remoteAddr?.hostname ?? "unknown",
        listenerScheme,
        rawPath,
        search,
      });
    },
    handle,
    render(error, thrown, _request, context) {
      // Refused before the path was read (Host, path): its suffix still decides, as for others.
      if (context.target === undefined) {
        context.format = findSuffixFormat(context.rawPath) ?? context.format;
      }
      log.failed(error, thrown, context);
      return context.oauthClientAuth === undefined
        ? toErrorResponse(error, context.format)
        : toOAuthErrorResponse(error, context.oauthClientAuth);
    },
    securityHeaders: API_SECURITY_HEADERS,
    finish(request, context, response, seconds) {
      cors.addHeaders(request, response.headers);
      log.finished(request, context, response.status, seconds);
    },
  });
}
