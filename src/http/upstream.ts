/**
 * The upstream proxy (`--upstream URL`): once the gate has authenticated a
 * request that keygate does not answer itself, it is forwarded to the
 * operator's backend, body and response streamed, never buffered.
 *
 * What the backend receives:
 * - the method, and the **canonical** path keygate authorised (see
 *   `paths.ts`), each segment re-encoded so that it decodes to exactly what
 *   the gate saw, behind the upstream URL's own path;
 * - the query, less the credentials (`api_key`, `api_token`, `access_token`)
 *   unless `hideCredentials` is off;
 * - the headers, by the policy docs/security.md ("Headers sent to the
 *   upstream") states and {@link toUpstreamHeaders} implements.
 *
 * An unreachable upstream is 502 `bad_gateway`; one whose response headers do
 * not arrive within the timeout is 504 `gateway_timeout`.
 *
 * @module
 */
import type { RequestContext, UpstreamOptions } from "./context.ts";
import { HttpError } from "./errors.ts";
import { type Identity, toIdentityHeaders } from "../auth/gate.ts";
import type { Logger } from "../platform/logger.ts";
import { parseRequestPath, type PathOptions, type RequestPath } from "./paths.ts";

/** Query parameters that carry credentials, removed when hiding credentials. */
export const CREDENTIAL_PARAMS: ReadonlySet<string> = new Set([
  "api_key",
  "api_token",
  "access_token",
]);
/** Request headers that carry credentials, removed when hiding credentials. */
export const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set(["authorization", "x-api-key"]);

/** Hop-by-hop headers (RFC 9110 §7.6.1), never forwarded in either direction. */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** Request headers keygate sets itself (or lets `fetch` set). */
const REPLACED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "expect",
  "accept-encoding",
  "x-request-id",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
]);

const KEYGATE_PATH = /^\/(healthz|readyz)$|^\/api(\/secure)?\/userservice(\/|$)/;

/**
 * Whether keygate owns `path` (canonical): its health checks and everything
 * under `/api/userservice` and `/api/secure/userservice`, in any letter case.
 * Such paths are never forwarded.
 */
export function isKeygatePath(path: string): boolean {
  return KEYGATE_PATH.test(path.toLowerCase());
}

/** Characters left as they are in a path segment; everything else is percent-encoded. */
const SEGMENT_UNSAFE = /[^A-Za-z0-9\-._~!$&'()*+,=:@]/gu;

/**
 * The path the upstream receives for a canonical `target`: each segment
 * percent-encoded where needed (so no backend reads a path parameter or
 * separator into it), the `.json`/`.xml` suffix and a trailing slash kept.
 */
export function toUpstreamPath(target: RequestPath): string {
  const segments = target.path === "/" ? [] : target.path.slice(1).split("/");
  let path = "/" + segments.map((s) => s.replace(SEGMENT_UNSAFE, encodeURIComponent)).join("/");
  if (target.format !== undefined) path += `.${target.format}`;
  if (target.trailingSlash && path !== "/") path += "/";
  return path;
}

/**
 * The upstream path for a raw request path, as {@link toUpstreamPath} of its canonical form.
 *
 * @throws {HttpError} 400 as `parseRequestPath`.
 */
export function toUpstreamPathOf(rawPath: string, options?: PathOptions): string {
  return toUpstreamPath(parseRequestPath(rawPath, options));
}

function decodeName(pair: string): string {
  const name = pair.split("=", 1)[0].replaceAll("+", " ");
  try {
    return decodeURIComponent(name).toLowerCase();
  } catch {
    return name.toLowerCase();
  }
}

/** The query as sent (`?…` or `""`), less credential parameters when `hide` is on. */
export function toUpstreamQuery(search: string, hide: boolean): string {
  if (!hide || search.length <= 1) return search;
  const kept = search.slice(1).split("&").filter((pair) =>
    !CREDENTIAL_PARAMS.has(decodeName(pair))
  );
  return kept.length === 0 ? "" : `?${kept.join("&")}`;
}

function connectionTokens(headers: Headers): Set<string> {
  const value = headers.get("connection") ?? "";
  return new Set(value.split(",").map((t) => t.trim().toLowerCase()).filter(Boolean));
}

/**
 * Whether a client's request header is dropped because keygate owns it or a
 * backend may trust it: any name with `_` (CGI/WSGI-style backends read `_`
 * and `-` alike, so `X_Keygate_User` would pass for `X-Keygate-User`), every
 * identity or forwarding header (`X-Keygate-*`, `Forwarded`, `X-Real-IP`,
 * `True-Client-IP` and the other client-address headers, `X-Forwarded-*`,
 * `X-Request-Id`), and every header a backend may route on instead of the
 * request line (`X-Original-URL`, `X-Rewrite-URL`: Symfony, Zend, IIS), which
 * would move a public path keygate authorised under a secure one.
 * Header names reach this function lower-cased.
 */
export function isOwnedHeader(name: string): boolean {
  return name.includes("_") || name.startsWith("x-keygate-") || name.startsWith("x-forwarded-") ||
    OWNED_REQUEST_HEADERS.has(name);
}

const OWNED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  "forwarded",
  "x-real-ip",
  "true-client-ip",
  "client-ip",
  "x-client-ip",
  "x-cluster-client-ip",
  "cf-connecting-ip",
  "fastly-client-ip",
  "x-request-id",
  "x-original-url",
  "x-rewrite-url",
  "x-original-uri",
  "x-original-method",
  "x-host",
  "x-original-host",
  "x-http-host-override",
]);

/**
 * The headers the upstream receives (docs/security.md, "Headers sent to the
 * upstream"): the client's, less hop-by-hop headers, those keygate owns
 * ({@link isOwnedHeader}) and, when `hide` is on, the credentials; then
 * keygate's own: identity, request id, `X-Forwarded-For`, `X-Forwarded-Proto`
 * (the scheme the client's connection used) and `X-Forwarded-Host` (the `Host`
 * keygate answered on, never an absolute-form target's authority).
 */
export function toUpstreamHeaders(
  request: Request,
  context: RequestContext,
  identity: Identity,
  hide: boolean,
): Headers {
  const listed = connectionTokens(request.headers);
  const headers = new Headers();
  for (const [name, value] of request.headers) {
    if (HOP_BY_HOP.has(name) || listed.has(name) || REPLACED_REQUEST_HEADERS.has(name)) continue;
    if (isOwnedHeader(name)) continue;
    if (hide && CREDENTIAL_HEADERS.has(name)) continue;
    headers.append(name, value);
  }
  for (const [name, value] of toIdentityHeaders(identity)) headers.set(name, value);
  headers.set("x-request-id", context.requestId);
  // Only a trusted proxy's chain is passed on (a client's could name anyone), with the hop
  // keygate saw appended: the TCP peer, as every proxy does.
  const forwardedFor = context.forwardedFor;
  headers.set(
    "x-forwarded-for",
    forwardedFor ? `${forwardedFor}, ${context.peerAddress}` : context.peerAddress,
  );
  headers.set("x-forwarded-proto", context.scheme);
  headers.set("x-forwarded-host", context.url.host);
  // Deno's fetch decodes bodies in encodings the request accepts, which would leave a false
  // Content-Encoding; with "identity" it decodes nothing and bytes pass as the upstream sent them.
  // keygate's server compresses the response for the client itself.
  headers.set("accept-encoding", "identity");
  return headers;
}

function toClientHeaders(upstream: Response): Headers {
  const listed = connectionTokens(upstream.headers);
  const headers = new Headers();
  for (const [name, value] of upstream.headers) {
    if (HOP_BY_HOP.has(name) || listed.has(name)) continue;
    headers.append(name, value);
  }
  return headers;
}

const NO_BODY_STATUSES: ReadonlySet<number> = new Set([204, 205, 304]);
/** Methods `fetch` refuses to send (and that no API needs): refused with 405, not 502. */
const UNFORWARDABLE_METHODS: ReadonlySet<string> = new Set(["CONNECT", "TRACE", "TRACK"]);

/** What the proxy needs besides its options. */
export interface UpstreamDeps {
  logger: Logger;
}

/** Forwards one authenticated request and returns the upstream's response, streamed. */
export type Forward = (
  request: Request,
  context: RequestContext,
  identity: Identity,
) => Promise<Response>;

/** Creates the forwarding function for `options`. */
export function createUpstreamProxy(options: UpstreamOptions, deps: UpstreamDeps): Forward {
  const hide = options.hideCredentials ?? true;
  const origin = options.url.origin;
  const basePath = options.url.pathname.replace(/\/+$/, "");

  return async function forward(request, context, identity) {
    if (UNFORWARDABLE_METHODS.has(request.method.toUpperCase())) {
      throw new HttpError(
        405,
        "method_not_allowed",
        `Method ${request.method} is not allowed: it is never forwarded`,
        { headers: { allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS" } },
      );
    }
    if (context.target === undefined) throw new TypeError("Cannot forward: the path was not read");
    const url = origin + basePath + toUpstreamPath(context.target) +
      toUpstreamQuery(context.url.search, hide);
    const headers = toUpstreamHeaders(request, context, identity, hide);
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), options.timeoutMs);
    const hasBody = request.method !== "GET" && request.method !== "HEAD";
    let upstream: Response;
    try {
      upstream = await fetch(url, {
        method: request.method,
        headers,
        body: hasBody ? request.body : null,
        redirect: "manual",
        // Not request.signal: a client that goes away cancels the streams, which ends the fetch.
        signal: timeout.signal,
        // Streams the request body rather than buffering it.
        duplex: "half",
      } as RequestInit);
    } catch (error) {
      const timedOut = timeout.signal.aborted;
      deps.logger.warn("upstream request failed", {
        request_id: context.requestId,
        upstream: origin,
        error: timedOut ? "timeout" : toSafeErrorText(error),
      });
      if (timedOut) {
        throw new HttpError(504, "gateway_timeout", "The upstream service did not answer in time");
      }
      throw new HttpError(502, "bad_gateway", "The upstream service is unavailable", {
        cause: error,
      });
    } finally {
      clearTimeout(timer);
    }
    const empty = request.method === "HEAD" || NO_BODY_STATUSES.has(upstream.status);
    if (empty) upstream.body?.cancel().catch(() => {});
    // A fetch response's headers are immutable; the app adds its own, so copy them.
    return new Response(empty ? null : upstream.body, {
      status: upstream.status,
      statusText: upstream.statusText,
      headers: toClientHeaders(upstream),
    });
  };
}

/**
 * An error's name and message for the log, with any URL (which may hold a
 * query with credentials) left out, at most 300 characters.
 */
export function toSafeErrorText(error: unknown): string {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return message.replace(/[a-z][a-z0-9+.-]*:\/\/\S+/gi, "<url>").slice(0, 300);
}
