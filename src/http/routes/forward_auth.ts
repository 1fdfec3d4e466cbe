/**
 * Forward-auth, `/api/userservice/verify` (any method): a proxy's sub-request
 * (nginx `auth_request`, Caddy `forward_auth`, Traefik `ForwardAuth`) naming
 * the original request in `X-Original-URI` / `X-Forwarded-Uri`. The gate's
 * rule is applied to it as if keygate had received it, and the answer is 200
 * with the identity headers, or the gate's 401 (or 403 for a path that cannot
 * be canonicalised).
 *
 * @module
 */
import type { ForwardAuthHeader, RequestContext } from "../context.ts";
import { HttpError } from "../errors.ts";
import { type Gate, type Identity, toIdentityHeaders } from "../../auth/gate.ts";
import { parseRequestPath, type RequestPath, splitRequestTarget } from "../paths.ts";
import type { Route } from "../route_table.ts";
import type { AdmitLimits } from "../limits.ts";
import type { Logger } from "../../platform/logger.ts";

/** Forward-auth endpoint for nginx `auth_request`, Caddy `forward_auth`, Traefik `ForwardAuth`. */
export const VERIFY_PATH = "/api/userservice/verify";

const METHOD = /^[A-Za-z]{1,20}$/;

/** What forward-auth needs. */
export interface ForwardAuthDeps {
  /** The listener's gate: forward-auth asks it about the original request. */
  gate: Gate;
  logger: Logger;
  forwardAuthHeader?: ForwardAuthHeader;
  unicodePaths?: boolean;
  /** The original request's limits (its key's and user's). */
  admitLimits?: AdmitLimits;
}

/**
 * The forward-auth route. It takes every method (nginx's `auth_request` keeps
 * the original one) and answers for the original request's credentials.
 */
export function createForwardAuthRoute(deps: ForwardAuthDeps): Route<RequestContext> {
  const { gate, logger } = deps;
  const admitLimits = deps.admitLimits ?? (() => {});
  const options: OriginalRequestOptions = {
    trusted: deps.forwardAuthHeader ?? "either",
    allowUnicode: deps.unicodePaths ?? false,
  };

  function verify(request: Request, context: RequestContext): Response | Promise<Response> {
    const original = findOriginalRequest(request, context, options);
    if (original.target.format !== undefined) context.format = original.target.format;
    const identity = gate.authenticate(
      request,
      { query: original.url.searchParams, clientAddress: context.clientAddress },
      original.target.secure,
    );
    const verified = (found: Identity): Response | Promise<Response> => {
      context.apiKeyId = found.apiKeyId;
      const admitted = admitLimits(context, found);
      return admitted instanceof Promise
        ? admitted.then(() => answerVerified(found))
        : answerVerified(found);
    };
    const answerVerified = (found: Identity): Response => {
      logger.debug("forward-auth verified", {
        request_id: context.requestId,
        method: original.method,
        secure: original.target.secure,
        key_id: found.apiKeyId,
      });
      return new Response(null, { status: 200, headers: toIdentityHeaders(found) });
    };
    // A cached grant is answered synchronously; anything else waits for the store.
    return identity instanceof Promise ? identity.then(verified) : verified(identity);
  }

  return { method: "*", path: VERIFY_PATH, caller: "anyone", handle: verify };
}

/** Which header family names the original request, and whether its path may be Unicode. */
interface OriginalRequestOptions {
  trusted: ForwardAuthHeader;
  allowUnicode: boolean;
}

/**
 * The original URI and method a proxy names, from the header family the
 * operator configured (`--forward-auth-header`): `X-Original-URI` and
 * `X-Original-Method` (nginx), or `X-Forwarded-Uri` and `X-Forwarded-Method`
 * (Caddy, Traefik). The other family is ignored. With `either`, exactly one
 * family may carry a URI: a proxy sets its own, and a client may add the other.
 */
function findOriginalHeaders(
  request: Request,
  trusted: ForwardAuthHeader,
): { uri: string | null; method: string | null } {
  const original = {
    uri: request.headers.get("x-original-uri"),
    method: request.headers.get("x-original-method"),
  };
  const forwarded = {
    uri: request.headers.get("x-forwarded-uri"),
    method: request.headers.get("x-forwarded-method"),
  };
  if (trusted === "x-original-uri") return original;
  if (trusted === "x-forwarded-uri") return forwarded;
  if (original.uri !== null && forwarded.uri !== null) {
    throw new HttpError(
      403,
      "ambiguous_original_uri",
      "Both X-Original-URI and X-Forwarded-Uri were sent: set --forward-auth-header to the one your proxy sets",
    );
  }
  return original.uri !== null ? original : forwarded;
}

/** The original request a proxy asks about: its canonical path and its query, on this origin. */
function findOriginalRequest(
  request: Request,
  context: RequestContext,
  options: OriginalRequestOptions,
) {
  const headers = findOriginalHeaders(request, options.trusted);
  const uri = headers.uri;
  if (uri === null || !uri.startsWith("/")) {
    throw new HttpError(
      400,
      "invalid_request",
      "Missing original request: send its path and query in X-Original-URI or X-Forwarded-Uri",
    );
  }
  const method = headers.method ?? request.method;
  if (!METHOD.test(method)) {
    throw new HttpError(400, "invalid_request", "Invalid X-Original-Method: expected a method");
  }
  // The same reading as a direct request: the path as sent through parseRequestPath, and a
  // query on this origin (so "//secure/x" stays a path, never a host).
  const { rawPath, search } = splitRequestTarget(uri);
  let url: URL;
  try {
    url = new URL(context.url.origin + "/" + search);
  } catch {
    throw new HttpError(400, "invalid_request", "Invalid X-Original-URI: not a path and query");
  }
  let target: RequestPath;
  try {
    target = parseRequestPath(rawPath, { allowUnicode: options.allowUnicode });
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    // A proxy passes 401 and 403 on to its client and turns anything else into 500.
    throw new HttpError(403, error.code, error.message);
  }
  return { url, target, method: method.toUpperCase() };
}
