/**
 * The public API's handler: the listener pipeline (pipeline.ts: request id,
 * the one catch, security headers) composed with this listener's pieces:
 * `Host` (host.ts), the canonical path (paths.ts), the response format
 * (negotiate.ts), proxy mode (proxy_trust.ts), CORS (cors.ts), the health
 * checks (health.ts), the routing (api_routing.ts: the gate for secure paths,
 * the route table of routes/, the upstream), and the request log (request_log.ts).
 *
 * @module
 */
import { createGate } from "../auth/gate.ts";
import { createLimiter } from "../auth/limiter.ts";
import { createMetrics } from "../platform/metrics.ts";
import { checkCallers, createApiRouting } from "./api_routing.ts";
import type { AppDeps } from "./context.ts";
import { CORS_METHODS, CORS_METHODS_ALL, createCors } from "./cors.ts";
import { HttpError, toErrorResponse } from "./errors.ts";
import { createLimitAdmission, setRateLimitHeaders } from "./limits.ts";
import { createHealthCheck, HEALTH_PATH, isHealthPath, READY_PATH } from "./health.ts";
import { createHostReader } from "./host.ts";
import { negotiateResponseFormat } from "./negotiate.ts";
import { toOAuthErrorResponse } from "./oauth_client.ts";
import { createPathParser, findSuffixFormat, splitRequestTarget } from "./paths.ts";
import { createListenerHandler, type Handler } from "./pipeline.ts";
import { createNamedClientCheck, createProxyTrust } from "./proxy_trust.ts";
import { HandlerContext } from "./request_context.ts";
import { createRequestLog } from "./request_log.ts";
import { createRouteTable } from "./route_table.ts";
import { API_SECURITY_HEADERS } from "./security_headers.ts";
import { createBackendRoutes, INTROSPECT_PATH, REVOKE_PATH } from "./routes/backend.ts";
import { VERIFY_PATH } from "./routes/forward_auth.ts";
import { createSecureRoutes, CURRENT_TOKEN_PATH } from "./routes/secure.ts";
import { createTokenRoutes, TOKENS_PATH } from "./routes/tokens.ts";
import { createUpstreamProxy } from "./upstream.ts";
import { toJsonError } from "./admin/admin_json.ts";
import { createPortalHandler, isPortalPath } from "./portal/portal_app.ts";

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

/** Creates the public API's handler from its dependencies. */
export function createHandler(deps: AppDeps): Handler {
  const metrics = deps.metrics ?? createMetrics();
  const { store, logger } = deps;
  const gate = createGate({ ...deps, metrics });
  const admitLimits = createLimitAdmission(
    deps.limiter ?? createLimiter({ store, clock: deps.clock, logger, metrics, leaseAhead: true }),
  );
  const limitHeaders = deps.limitHeaders ?? true;
  const routes = [
    ...createTokenRoutes({ ...deps, metrics }),
    ...createBackendRoutes({ ...deps, gate, metrics, admitLimits }),
    ...createSecureRoutes(deps),
  ];
  checkCallers(routes);
  const route = createApiRouting({
    table: createRouteTable(routes, { alsoAllowed: ["OPTIONS"] }),
    gate,
    admitLimits,
    forward: deps.upstream && createUpstreamProxy(deps.upstream, { logger }),
  });
  const readHost = createHostReader();
  const readPath = createPathParser({ allowUnicode: deps.unicodePaths ?? false });
  const acceptProxied = deps.proxy && createProxyTrust(deps.proxy);
  const requireNamedClient = createNamedClientCheck(logger);
  const answerHealth = createHealthCheck({ store, logger, metrics });
  const cors = createCors({
    origins: deps.corsOrigins ?? ["*"],
    methods: deps.upstream || deps.secureRoutes ? CORS_METHODS_ALL : CORS_METHODS,
  });
  const log = createRequestLog({ logger, metrics, routeLabels: ROUTE_LABELS });
  const listenerScheme = deps.scheme ?? "https";
  const portal = deps.portal &&
    createPortalHandler({
      ...deps.portal,
      store,
      clock: deps.clock,
      hasher: deps.hasher,
      logger,
    });

  function handle(request: Request, context: HandlerContext): Response | Promise<Response> {
    context.host = readHost(request);
    if (portal !== undefined && isPortalPath(context.rawPath)) {
      // Pages and JSON, whatever Accept says; proxy mode's checks as for every other path.
      context.portal = true;
      if (acceptProxied) {
        acceptProxied(request, context);
        requireNamedClient(context);
      }
      return portal(request, context);
    }
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
    const path = target.path;
    const isHealth = isHealthPath(path);
    if (acceptProxied && !isHealth) acceptProxied(request, context);
    // Forward-auth asks about OPTIONS requests too, so it is never a preflight.
    if (request.method === "OPTIONS" && path !== VERIFY_PATH) return cors.preflight(request);
    if (isHealth) return answerHealth(path, request.method);
    return route(request, context, target);
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
      if (context.portal) return toJsonError(error);
      return context.oauthClientAuth === undefined
        ? toErrorResponse(error, context.format)
        : toOAuthErrorResponse(error, context.oauthClientAuth);
    },
    securityHeaders: API_SECURITY_HEADERS,
    finish(request, context, response, seconds) {
      cors.addHeaders(request, response.headers);
      if (limitHeaders && context.limits !== undefined) {
        setRateLimitHeaders(response.headers, context.limits);
      }
      log.finished(request, context, response.status, seconds);
    },
  });
}
