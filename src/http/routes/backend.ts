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
 * exactly one way per request (`oauth_caller.ts`). Forward-auth is
 * `forward_auth.ts`.
 *
 * @module
 */
import type { RequestContext } from "../context.ts";
import { isTokenShaped } from "../../auth/credentials.ts";
import { AuthError } from "../../auth/errors.ts";
import type { AdmitLimits } from "../limits.ts";
import { createTokenStatusCache } from "../../auth/grant_cache.ts";
import { createRevocation } from "../../auth/revocation.ts";
import { CONTENT_TYPES, type DocumentValue, toResponse } from "../respond.ts";
import type { Route } from "../route_table.ts";
import type { Store } from "../../store/store.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Metrics } from "../../platform/metrics.ts";
import { CLIENT_AUTH_METHODS } from "../oauth_client.ts";
import { createForwardAuthRoute, type ForwardAuthDeps } from "./forward_auth.ts";
import { createCallerReader } from "./oauth_caller.ts";

/** Token introspection (RFC 7662), for resource-server keys. */
export const INTROSPECT_PATH = "/api/userservice/tokens/introspect";
/** Token revocation (RFC 7009). */
export const REVOKE_PATH = "/api/userservice/tokens/revoke";

/** RFC 8414's metadata document, for off-the-shelf OAuth clients' discovery. */
export const METADATA_PATH = "/.well-known/oauth-authorization-server";

/** Root element of the introspection answer in XML (JSON has RFC 7662's bare object). */
export const INTROSPECTION_ROOT = "token_introspection";

/** What the backend endpoints need: forward-auth's, and the store's for the rest. */
export interface BackendRouteDeps extends ForwardAuthDeps {
  store: Store;
  clock: Clock;
  grantCacheSize?: number;
  /** Where the token-status cache reports its hits, misses and evictions. */
  metrics?: Partial<Pick<Metrics, "watchCache">>;
  /** The metadata's `issuer` (`--issuer`); default: the origin the client asked. */
  issuer?: string;
  /** The caller's limits: forward-auth's original request, introspection's and revocation's caller. */
  admitLimits?: AdmitLimits;
}

/**
 * The backend endpoints' routes: forward-auth (`forward_auth.ts`), the
 * metadata, introspection and revocation. Introspection and revocation
 * authenticate their caller themselves, since its credentials may be in the body.
 */
export function createBackendRoutes(deps: BackendRouteDeps): Route<RequestContext>[] {
  const { store, clock, logger } = deps;
  const readCaller = createCallerReader(deps.gate, deps.admitLimits);
  const revocation = createRevocation({ store, clock });
  // Resource servers introspect the same tokens again and again; exact like the grant cache.
  const findTokenStatus = createTokenStatusCache(
    store,
    deps.grantCacheSize,
    (cache) => deps.metrics?.watchCache?.("token_status", cache),
  );

  function toIntrospection(format: "json" | "xml", body: Record<string, DocumentValue>) {
    if (format === "xml") return toResponse(format, INTROSPECTION_ROOT, body);
    return new Response(JSON.stringify(body), { headers: { "content-type": CONTENT_TYPES.json } });
  }

  /**
   * RFC 8414 metadata: the issuer is `--issuer`, or else the origin the client asked (through a
   * proxy, its Host).
   */
  function metadata(context: RequestContext): Response {
    const issuer = deps.issuer ?? `${context.scheme}://${context.url.host}`;
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
    const headers: Record<string, string> = { "content-type": CONTENT_TYPES.json };
    // Taken from Host, the document differs by Host: a shared cache must not mix them.
    if (deps.issuer === undefined) headers.vary = "host";
    return new Response(JSON.stringify(body), { headers });
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
    createForwardAuthRoute(deps),
    { method: "GET", path: METADATA_PATH, caller: "anyone", handle: answerMetadata },
    { method: "HEAD", path: METADATA_PATH, caller: "anyone", handle: answerMetadata },
    { method: "POST", path: INTROSPECT_PATH, caller: "client", handle: introspect },
    { method: "POST", path: REVOKE_PATH, caller: "client", handle: revoke },
  ];
}
