/**
 * What every listener does with a request, whatever it serves: a request id,
 * the listener's own work, **the one catch** (any throw becomes an
 * `HttpError` through `toHttpError`, then a response through the listener's
 * renderer), the body drained, the security headers and `X-Request-Id` set,
 * and the listener's closing step (access log, metrics). The public API's
 * listener (app.ts) and the admin listener (admin/admin_app.ts) are two
 * compositions of this one function.
 *
 * @module
 */
import { drainBody } from "./body.ts";
import { type HttpError, toHttpError } from "./errors.ts";

/** What `Deno.serve` tells a handler about the connection; all optional for tests. */
export interface ConnectionInfo {
  remoteAddr?: { hostname?: string };
}

/** A keygate request handler. */
export type Handler = (request: Request, info?: ConnectionInfo) => Promise<Response>;

/** A header name and value. */
export type HeaderPair = readonly [string, string];

/** One listener's parts, composed by {@link createListenerHandler}. */
export interface ListenerParts<C> {
  /** A fresh context, before anything the client sent is read. */
  begin(request: Request, info: ConnectionInfo | undefined, requestId: string): C;
  /** Everything the listener does with the request; may throw anything. */
  handle(request: Request, context: C): Response | Promise<Response>;
  /** The listener's renderer: an error in its documented body shape (and its logs). */
  render(error: HttpError, thrown: unknown, request: Request, context: C): Response;
  /** Set on every response. */
  securityHeaders: readonly HeaderPair[];
  /** Last, with the final response: CORS headers, access log, metrics. */
  finish(request: Request, context: C, response: Response, seconds: number): void;
}

/**
 * Request ids: a random prefix per listener (eight hex digits) and a counter,
 * `1a2b3c4d-1f`. Unique within a process's listeners, cheap, and never a secret.
 */
export function createRequestIds(): () => string {
  const bootId = crypto.randomUUID().slice(0, 8);
  let count = 0;
  return () => `${bootId}-${(++count).toString(36)}`;
}

/** Composes a listener's parts into its handler. */
export function createListenerHandler<C extends { readonly requestId: string }>(
  parts: ListenerParts<C>,
): Handler {
  const nextRequestId = createRequestIds();
  const { begin, handle, render, securityHeaders, finish } = parts;
  return async function serveRequest(request, info) {
    const started = performance.now();
    const context = begin(request, info, nextRequestId());
    let response: Response;
    try {
      response = await handle(request, context);
    } catch (thrown) {
      response = render(toHttpError(thrown), thrown, request, context);
    }
    // A body refused unread (401 before the body was needed): read it first, or HTTP/2 clients
    // get a stream reset instead of the answer. Nothing to do for a GET or a body already read.
    if (request.body !== null && !request.bodyUsed) await drainBody(request);
    const headers = response.headers;
    for (const [name, value] of securityHeaders) headers.set(name, value);
    headers.set("x-request-id", context.requestId);
    finish(request, context, response, (performance.now() - started) / 1000);
    return response;
  };
}
