/**
 * Endpoints for the backends and proxies keygate protects:
 *
 * - `/api/userservice/verify` (forward-auth, any method): a proxy's
 *   sub-request naming the original request in `X-Original-URI` /
 *   `X-Forwarded-Uri`; the gate's rule is applied to it as if keygate had
 *   received it, and the answer is 200 with the identity headers, or the
 *   gate's 401 (or 403 for a path that cannot be canonicalised).
 * - `POST /api/userservice/tokens/introspect` (RFC 7662): for resource-server
 *   keys only; `active` and the token's facts, or `active: false`.
 * - `POST /api/userservice/tokens/revoke` (RFC 7009): revokes a token issued
 *   with the caller's API key; always 200.
 * - `GET /.well-known/oauth-authorization-server` (RFC 8414): the metadata
 *   that names the two endpoints above and how clients authenticate to them.
 *
 * Introspection and revocation take the caller's key in `X-Api-Key` (or
 * `api_key`), or as standard OAuth client credentials (`oauth_client.ts`);
 * exactly one way per request.
 *
 * @module
 */
import type { ForwardAuthHeader, RequestContext } from "../context.ts";
import { isTokenShaped } from "../../auth/credentials.ts";
import { HttpError } from "../errors.ts";
import { AuthError } from "../../auth/errors.ts";
import { type Gate, type Identity, toIdentityHeaders } from "../../auth/gate.ts";
import type { AdmitLimits } from "../limits.ts";
import { createTokenStatusCache } from "../../auth/grant_cache.ts";
import { createRevocation } from "../../auth/revocation.ts";
import { parseRequestPath, type RequestPath, splitRequestTarget } from "../paths.ts";
import { CONTENT_TYPES, type DocumentValue, toResponse } from "../respond.ts";
import type { Route } from "../route_table.ts";
import { isFormBody, readTokenRequest, type TokenRequest } from "../token_request.ts";
import { findRequestApiKey } from "../../auth/api_key.ts";
import type { KeyHolder, Store } from "../../store/store.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";
import type { Metrics } from "../../platform/metrics.ts";
import {
  CLIENT_AUTH_METHODS,
  type ClientCredentials,
  hasBasicAuthorization,
  parseFormCredentials,
  readBasicCredentials,
} from "../oauth_client.ts";

/** Forward-auth endpoint for nginx `auth_request`, Caddy `forward_auth`, Traefik `ForwardAuth`. */
export const VERIFY_PATH = "/api/userservice/verify";
/** Token introspection (RFC 7662), for resource-server keys. */
export const INTROSPECT_PATH = "/api/userservice/tokens/introspect";
/** Token revocation (RFC 7009). */
export const REVOKE_PATH = "/api/userservice/tokens/revoke";

/** RFC 8414's metadata document, for off-the-shelf OAuth clients' discovery. */
export const METADATA_PATH = "/.well-known/oauth-authorization-server";

/** Root element of the introspection answer in XML (JSON has RFC 7662's bare object). */
export const INTROSPECTION_ROOT = "token_introspection";

const METHOD = /^[A-Za-z]{1,20}$/;

/** What the backend endpoints need. */
export interface BackendRouteDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** The listener's gate: forward-auth asks it about the original request. */
  gate: Gate;
  grantCacheSize?: number;
  /** Where the token-status cache reports its hits, misses and evictions. */
  metrics?: Partial<Pick<Metrics, "watchCache">>;
  forwardAuthHeader?: ForwardAuthHeader;
  unicodePaths?: boolean;
  /** The caller's limits: forward-auth's original request, introspection's and revocation's caller. */
  admitLimits?: AdmitLimits;
}

/**
 * The backend endpoints' routes. Forward-auth takes every method (nginx's
 * `auth_request` keeps the original one) and answers for the original
 * request's credentials; introspection and revocation authenticate their
 * caller themselves, since its credentials may be in the body.
 */
export function createBackendRoutes(deps: BackendRouteDeps): Route<RequestContext>[] {
  const { store, clock, logger, gate } = deps;
  const admitLimits = deps.admitLimits ?? (() => {});
  const revocation = createRevocation({ store, clock });
  // Resource servers introspect the same tokens again and again; exact like the grant cache.
  const findTokenStatus = createTokenStatusCache(
    store,
    deps.grantCacheSize,
    (cache) => deps.metrics?.watchCache?.("token_status", cache),
  );

  const trusted = deps.forwardAuthHeader ?? "either";
  const pathOptions = { allowUnicode: deps.unicodePaths ?? false };

  /**
   * The original URI and method a proxy names, from the header family the
   * operator configured (`--forward-auth-header`): `X-Original-URI` and
   * `X-Original-Method` (nginx), or `X-Forwarded-Uri` and `X-Forwarded-Method`
   * (Caddy, Traefik). The other family is ignored. With `either`, exactly one
   * family may carry a URI: a proxy sets its own, and a client may add the other.
   */
  function findOriginalHeaders(request: Request): { uri: string | null; method: string | null } {
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
  function findOriginalRequest(request: Request, context: RequestContext) {
    const headers = findOriginalHeaders(request);
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
      target = parseRequestPath(rawPath, pathOptions);
    } catch (error) {
      if (!(error instanceof HttpError)) throw error;
      // A proxy passes 401 and 403 on to its client and turns anything else into 500.
      throw new HttpError(403, error.code, error.message);
    }
    return { url, target, method: method.toUpperCase() };
  }

  function verify(request: Request, context: RequestContext): Response | Promise<Response> {
    const original = findOriginalRequest(request, context);
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

  function toIntrospection(format: "json" | "xml", body: Record<string, DocumentValue>) {
    if (format === "xml") return toResponse(format, INTROSPECTION_ROOT, body);
    return new Response(JSON.stringify(body), { headers: { "content-type": CONTENT_TYPES.json } });
  }

  function moreThanOneWay(): HttpError {
    return new HttpError(
      400,
      "invalid_request",
      "The client authenticated in more than one way: send X-Api-Key, Basic credentials " +
        "or client_id and client_secret, only one",
    );
  }

  function authenticateClient(client: ClientCredentials, context: RequestContext) {
    return gate.authenticateClient(client.id, client.secret, context);
  }

  /**
   * The caller of introspection or revocation and its token request, the
   * caller authenticated by its key (`X-Api-Key` or `api_key`), by
   * `client_secret_basic`, or by `client_secret_post`: one of them.
   */
  async function readCaller(
    request: Request,
    context: RequestContext,
  ): Promise<{ caller: KeyHolder; body: TokenRequest }> {
    // From the first sign of OAuth client authentication, errors are RFC 6749's.
    const isBasic = hasBasicAuthorization(request);
    if (isBasic) context.oauthClientAuth = "client_secret_basic";
    const keyGiven = findRequestApiKey(request, context.query) !== undefined;
    if (isBasic && keyGiven) throw moreThanOneWay();
    const basic = isBasic ? readBasicCredentials(request) : undefined;
    // Credentials outside the body are checked before the body is read; so is a missing key,
    // unless a form may carry client_secret_post.
    let caller = basic !== undefined
      ? await authenticateClient(basic, context)
      : keyGiven || !isFormBody(request)
      ? await gate.authenticateKey(request, context)
      : undefined;
    const body = await readTokenRequest(request);
    if (body.form?.has("client_id") || body.form?.has("client_secret")) {
      context.oauthClientAuth ??= "client_secret_post";
      if (caller !== undefined) throw moreThanOneWay();
      let posted: ClientCredentials | undefined;
      try {
        posted = parseFormCredentials(body.form);
      } catch (error) {
        if (!(error instanceof SyntaxError)) throw error;
        throw new HttpError(400, "invalid_request", `Invalid client credentials: ${error.message}`);
      }
      caller = await authenticateClient(posted!, context);
    }
    // No credentials at all: the key check says what is missing.
    caller ??= await gate.authenticateKey(request, context);
    context.apiKeyId = caller.apiKeyId;
    await admitLimits(context, caller);
    return { caller, body };
  }

  /** RFC 8414 metadata: the issuer is the origin the client asked (through a proxy, its Host). */
  function metadata(context: RequestContext): Response {
    const issuer = `${context.scheme}://${context.url.host}`;
    const body = {
      issuer,
      introspection_endpoint: issuer + INTROSPECT_PATH,
      introspection_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
      revocation_endpoint: issuer + REVOKE_PATH,
      revocation_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
      // keygate issues tokens through its own auth_request, not an OAuth grant.
      response_types_supported: [],
      grant_types_supported: [],
    };
    return new Response(JSON.stringify(body), { headers: { "content-type": CONTENT_TYPES.json } });
  }

  async function introspect(request: Request, context: RequestContext): Promise<Response> {
    const { caller, body: { token } } = await readCaller(request, context);
    if (!caller.introspect) {
      throw new AuthError(
        "forbidden",
        "This API key may not introspect tokens: ask for a resource-server key (--introspect)",
      );
    }
    const now = clock.now();
    const status = isTokenShaped(token) ? await findTokenStatus(token, now) : undefined;
    if (status === undefined || !status.live || status.expiresAt <= now) {
      return toIntrospection(context.format, { active: false });
    }
    return toIntrospection(context.format, {
      active: true,
      sub: String(status.userId),
      email: status.email,
      key_id: status.apiKeyId,
      iat: Math.floor(status.issuedAt / 1000),
      exp: Math.floor(status.expiresAt / 1000),
    });
  }

  async function revoke(request: Request, context: RequestContext): Promise<Response> {
    const { caller, body: { token } } = await readCaller(request, context);
    const tokenId = await revocation.revokeTokenOfKey(token, {
      apiKeyId: caller.apiKeyId,
      email: caller.email,
      clientAddress: context.clientAddress,
    });
    if (tokenId !== undefined) {
      logger.info("token revoked", {
        event: "token_revoked",
        request_id: context.requestId,
        user_id: caller.userId,
        key_id: caller.apiKeyId,
        client: context.clientAddress,
      });
    }
    // RFC 7009 §2.2: 200 whether or not there was such a token.
    return new Response(null, { status: 200 });
  }

  const answerMetadata = (_request: Request, context: RequestContext) => metadata(context);
  return [
    { method: "*", path: VERIFY_PATH, caller: "anyone", handle: verify },
    { method: "GET", path: METADATA_PATH, caller: "anyone", handle: answerMetadata },
    { method: "HEAD", path: METADATA_PATH, caller: "anyone", handle: answerMetadata },
    { method: "POST", path: INTROSPECT_PATH, caller: "client", handle: introspect },
    { method: "POST", path: REVOKE_PATH, caller: "client", handle: revoke },
  ];
}
