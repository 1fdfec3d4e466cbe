/**
 * THE request handler: assigns a request id, canonicalises the path,
 * negotiates the response format, dispatches to the health checks, the token
 * router or the secure router, and turns every error into a response in
 * exactly one place.
 *
 * @module
 */
import {
  createBackendRouter,
  INTROSPECT_PATH,
  REVOKE_PATH,
  VERIFY_PATH,
} from "./routes/backend.ts";
import type { AppDeps, RequestContext } from "./context.ts";
import type { Format } from "../formats/format.ts";
import type { RequestPath } from "./paths.ts";
import { drainBody } from "./body.ts";
import { HttpError, toErrorResponse, toHttpError } from "./errors.ts";
import { type ClientAuthMethod, toOAuthErrorResponse } from "./oauth_client.ts";
import { StoreError } from "../store/errors.ts";
import { createGate, type Principal } from "../auth/gate.ts";
import { createAddressMatcher, findForwardedClient } from "../platform/ip.ts";
import { redactTarget } from "../platform/logger.ts";
import { createMetrics } from "../platform/metrics.ts";
import { invalidHost, readHost } from "./host.ts";
import { negotiateResponseFormat } from "./negotiate.ts";
import { createPathParser, findSuffixFormat, splitRequestTarget } from "./paths.ts";
import { CONTENT_TYPES } from "./respond.ts";
import { createSecureRouter, CURRENT_TOKEN_PATH, type SecureFallback } from "./routes/secure.ts";
import { createTokenRouter, TOKENS_PATH } from "./routes/tokens.ts";
import { createUpstreamProxy, isKeygatePath } from "./upstream.ts";

/** What `Deno.serve` tells a handler about the connection; all optional for tests. */
export interface ConnectionInfo {
  remoteAddr?: { hostname?: string };
}

/** A keygate request handler. */
export type Handler = (request: Request, info?: ConnectionInfo) => Promise<Response>;

/** Headers on every response. */
const SECURITY_HEADERS: readonly [string, string][] = [
  ["strict-transport-security", "max-age=31536000; includeSubDomains"],
  ["x-content-type-options", "nosniff"],
  ["cache-control", "no-store"],
];

const CORS_METHODS = "GET, POST, DELETE, OPTIONS";
/** With an upstream or the application's own routes, any method may be served. */
const CORS_METHODS_ALL = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
const CORS_EXPOSED = "X-Request-Id, Retry-After, WWW-Authenticate";
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;

/**
 * Route patterns used as metric labels. A path not listed is labelled
 * `secure_other` or `other`, so raw paths never become labels.
 * Add new endpoints here.
 */
const ROUTE_LABELS: ReadonlySet<string> = new Set([
  TOKENS_PATH,
  CURRENT_TOKEN_PATH,
  VERIFY_PATH,
  INTROSPECT_PATH,
  REVOKE_PATH,
  "/healthz",
  "/readyz",
]);
const METHOD_LABELS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
]);

function toRouteLabel(path: string | undefined, secure: boolean): string {
  if (path !== undefined && ROUTE_LABELS.has(path)) return path;
  return secure ? "secure_other" : "other";
}

function toJsonResponse(body: Record<string, string>, status: number): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": CONTENT_TYPES.json },
  });
}

/**
 * A request's context as the handler fills it in. Its URL and query are
 * built only when something reads them: most secure requests carry their
 * credentials in headers and never need either.
 */
class HandlerContext implements RequestContext {
  target?: Readonly<RequestPath>;
  forwardedFor?: string;
  apiKeyId?: number;
  /** Set by the secure router once the request is authenticated (declared: one object shape). */
  principal?: Principal;
  oauthClientAuth?: ClientAuthMethod;
  #url?: URL;
  #query?: URLSearchParams;
  /** Set once `Host` has been read and checked. */
  host?: string;

  constructor(
    readonly requestId: string,
    public format: Format,
    public clientAddress: string,
    readonly peerAddress: string,
    public scheme: "http" | "https",
    readonly listenerScheme: "http" | "https",
    readonly rawPath: string,
    readonly search: string,
  ) {}

  get url(): URL {
    if (this.#url !== undefined) return this.#url;
    if (this.host === undefined) throw new TypeError("The request's Host has not been read");
    try {
      // Routing reads the path only through the canonical path rule; this URL serves the query.
      this.#url = new URL(`${this.listenerScheme}://${this.host}${this.rawPath}${this.search}`);
    } catch {
      throw invalidHost();
    }
    return this.#url;
  }

  /**
   * The query as sent, form-decoded. The same parameters as `url.searchParams`
   * (the URL parser only percent-encodes characters that form decoding turns
   * back), without parsing a URL for them.
   */
  get query(): URLSearchParams {
    return this.#query ??= new URLSearchParams(this.search);
  }
}

/** Creates the handler from its dependencies. */
export function createHandler(deps: AppDeps): Handler {
  const { store, logger } = deps;
  const metrics = deps.metrics ?? createMetrics();
  const appDeps: AppDeps = { ...deps, metrics };
  const gate = createGate(appDeps);
  const forward = deps.upstream && createUpstreamProxy(deps.upstream, appDeps);
  const forwardSecure: SecureFallback | undefined = forward &&
    ((request, path, context) =>
      isKeygatePath(path) ? undefined : forward(request, context, context.principal));
  const routeToken = createTokenRouter(appDeps);
  const routeBackend = createBackendRouter(appDeps, gate);
  const routeSecure = createSecureRouter(appDeps, { gate, fallback: forwardSecure });
  const proxy = deps.proxy;
  const isTrustedProxy = createAddressMatcher(proxy?.trustedProxies ?? []);
  const corsOrigins = deps.corsOrigins ?? ["*"];
  const corsMethods = deps.upstream || deps.secureRoutes ? CORS_METHODS_ALL : CORS_METHODS;
  const readPath = createPathParser({ allowUnicode: deps.unicodePaths ?? false });
  const listenerScheme = deps.scheme ?? "https";
  const bootId = crypto.randomUUID().slice(0, 8);
  let requestCount = 0;

  function health(path: string, method: string): Response | Promise<Response> | undefined {
    if (path !== "/healthz" && path !== "/readyz") return undefined;
    if (method !== "GET" && method !== "HEAD") {
      throw new HttpError(405, "method_not_allowed", `Method ${method} is not allowed: use GET`, {
        headers: { allow: "GET, HEAD, OPTIONS" },
      });
    }
    if (path === "/healthz") return toJsonResponse({ status: "ok" }, 200);
    return checkReady();
  }

  async function checkReady(): Promise<Response> {
    let ready = false;
    let writeFailure: string | undefined;
    try {
      ready = await store.checkStoreReady();
      // Reads work; writes may not (disk full, read-only file system): logins would fail.
      if (ready) writeFailure = await store.findWriteFailure();
    } catch (error) {
      ready = false;
      metrics.databaseError("readiness");
      logger.error("readiness check failed", { error: String(error) });
    }
    if (!ready) return toJsonResponse({ status: "unavailable" }, 503);
    if (writeFailure !== undefined) {
      // The database's own words go to the operator's log, not to whoever can reach /readyz.
      logger.warn("readiness: writes fail", { error: writeFailure });
      return toJsonResponse({ status: "degraded", reason: "writes fail" }, 503);
    }
    return toJsonResponse({ status: "ready" }, 200);
  }

  /**
   * Proxy mode: the peer must be a trusted proxy and say the client used
   * HTTPS; the client address then comes from `X-Forwarded-For`.
   */
  function acceptProxied(request: Request, context: RequestContext, peer: string): void {
    if (!isTrustedProxy(peer)) {
      throw new HttpError(403, "untrusted_proxy", "Requests must come through the proxy");
    }
    const proto = request.headers.get("x-forwarded-proto");
    if (proto === null || proto.trim().toLowerCase() !== "https") {
      throw new HttpError(403, "https_required", "HTTPS required: the proxy must forward HTTPS");
    }
    const forwardedFor = request.headers.get("x-forwarded-for")?.trim();
    context.scheme = "https";
    context.forwardedFor = forwardedFor || undefined;
    context.clientAddress = findForwardedClient(peer, forwardedFor ?? null, isTrustedProxy);
  }

  function route(request: Request, context: RequestContext, path: string, secure: boolean) {
    return health(path, request.method) ??
      routeToken(request, path, context) ??
      routeBackend(request, path, context) ??
      (secure ? routeSecure(request, path, context) : routeOther(request, path, context));
  }

  /** Any other path: the API key first, then the upstream (if any), else 404. */
  async function routeOther(request: Request, path: string, context: RequestContext) {
    const holder = await gate.authenticateKey(request, context);
    context.apiKeyId = holder.apiKeyId;
    if (forward && !isKeygatePath(path)) return forward(request, context, holder);
    throw new HttpError(404, "not_found", "No endpoint at this path");
  }

  function preflight(request: Request): Response {
    const headers = new Headers({ "access-control-allow-methods": corsMethods });
    const requested = request.headers.get("access-control-request-headers");
    if (requested !== null && HEADER_LIST.test(requested.trim())) {
      headers.set("access-control-allow-headers", requested.trim());
    }
    headers.set("access-control-max-age", "600");
    headers.set("allow", corsMethods);
    return new Response(null, { status: 204, headers });
  }

  /**
   * CORS headers, only on cross-origin requests (those with `Origin`): other
   * clients ignore them, and every byte counts on the hot path (docs/performance.md:
   * larger responses leave in two TLS segments).
   */
  function addCors(request: Request, headers: Headers): void {
    const origin = request.headers.get("origin");
    if (origin === null) return;
    if (corsOrigins.includes("*")) {
      headers.set("access-control-allow-origin", "*");
    } else {
      headers.append("vary", "Origin");
      if (!corsOrigins.includes(origin)) return;
      headers.set("access-control-allow-origin", origin);
    }
    headers.set("access-control-expose-headers", CORS_EXPOSED);
  }

  return async function handle(request, info) {
    const started = performance.now();
    const requestId = `${bootId}-${(++requestCount).toString(36)}`;
    const peer = info?.remoteAddr?.hostname ?? "unknown";
    // Nothing the client sent has been read yet: the URL, Host and path are read in the try.
    const accepted = negotiateResponseFormat(request.headers.get("accept"));
    const { rawPath, search } = splitRequestTarget(request.url);
    const context = new HandlerContext(
      requestId,
      accepted ?? "xml",
      peer,
      peer,
      listenerScheme,
      listenerScheme,
      rawPath,
      search,
    );
    let routeLabel = "other";
    let response: Response;
    try {
      context.host = readHost(request);
      const target = readPath(rawPath);
      context.target = target;
      routeLabel = toRouteLabel(target.path, target.secure);
      const format = target.format ?? accepted;
      if (format === undefined) {
        throw new HttpError(
          406,
          "not_acceptable",
          "Not acceptable: this API answers in application/json or application/xml",
        );
      }
      context.format = format;
      const isHealth = target.path === "/healthz" || target.path === "/readyz";
      if (proxy !== undefined && !isHealth) acceptProxied(request, context, peer);
      // Forward-auth asks about OPTIONS requests too, so it is never a preflight.
      response = request.method === "OPTIONS" && target.path !== VERIFY_PATH
        ? preflight(request)
        : await route(request, context, target.path, target.secure);
    } catch (thrown) {
      const error = toHttpError(thrown);
      // Refused before the path was read (Host, path): its suffix still decides, as for others.
      if (context.target === undefined) {
        context.format = findSuffixFormat(rawPath) ?? context.format;
      }
      if (thrown instanceof StoreError) metrics.databaseError("request");
      if (routeLabel === TOKENS_PATH && request.method === "POST") {
        metrics.loginFailed(error.code);
        logger.warn("login failed", {
          event: "login_failed",
          request_id: requestId,
          reason: error.code,
          detail: typeof error.cause === "string" ? error.cause : undefined,
          key_id: context.apiKeyId ?? null,
          client: context.clientAddress,
        });
      }
      if (error.status === 429) {
        metrics.throttled(routeLabel);
        logger.warn("request throttled", {
          event: "throttled",
          request_id: requestId,
          route: routeLabel,
          client: context.clientAddress,
        });
      }
      if (error.status >= 500) {
        logger.error("request failed", {
          request_id: requestId,
          error: error.status === 500 ? String(error.cause) : error.code,
        });
      }
      response = context.oauthClientAuth === undefined
        ? toErrorResponse(error, context.format)
        : toOAuthErrorResponse(error, context.oauthClientAuth);
    }
    // A body refused unread (401 before the body was needed): read it first, or HTTP/2 clients
    // get a stream reset instead of the answer. Nothing to do for a GET or a body already read.
    if (request.body !== null && !request.bodyUsed) await drainBody(request);
    const headers = response.headers;
    for (const [name, value] of SECURITY_HEADERS) headers.set(name, value);
    headers.set("x-request-id", requestId);
    addCors(request, headers);
    const seconds = (performance.now() - started) / 1000;
    const method = METHOD_LABELS.has(request.method) ? request.method : "other";
    metrics.observeRequest({ route: routeLabel, method, status: response.status }, seconds);
    if (logger.enabled("info")) {
      logger.info("request", {
        request_id: requestId,
        method: request.method,
        // The query only once the path was read (it may hold secrets, which are redacted).
        path: context.target === undefined ? rawPath.slice(0, 200) : redactTarget(rawPath, search),
        status: response.status,
        duration_ms: Math.round(seconds * 100_000) / 100,
        key_id: context.apiKeyId ?? null,
        client: context.clientAddress,
      });
    }
    return response;
  };
}
