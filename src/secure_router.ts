/**
 * Secure requests: any path with a `secure` segment. The router authenticates
 * once (API key + access token: two hashes, one indexed read, an expiry
 * check), then dispatches to a handler that receives the principal.
 *
 * @module
 */
import { findRequestApiKey } from "./api_key.ts";
import type { AppDeps, RequestContext } from "./context.ts";
import { hashSecret, isTokenShaped, normalizeApiKey } from "./credentials.ts";
import { HttpError } from "./errors.ts";
import { toResponse } from "./respond.ts";
import { findRoute, type Routes } from "./route.ts";
import type { TokenGrant } from "./store.ts";

/** The authenticated caller of a secure request. */
export type Principal = TokenGrant;

/** Context of a secure request, after authentication. */
export interface SecureContext extends RequestContext {
  principal: Principal;
}

/** The built-in secure endpoint describing (GET) or revoking (DELETE) the caller's token. */
export const CURRENT_TOKEN_PATH = "/api/secure/userservice/tokens/current";

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The access token a request carries: `api_token` in the query, or `Authorization: Bearer`. */
export function findRequestToken(request: Request, url: URL): string | undefined {
  const query = url.searchParams.get("api_token")?.trim();
  if (query) return query;
  const authorization = request.headers.get("authorization");
  return authorization ? BEARER.exec(authorization)?.[1] : undefined;
}

function unauthorized(code: "invalid_token" | "token_expired", message: string): HttpError {
  return new HttpError(401, code, message, {
    headers: { "www-authenticate": `Bearer realm="keygate", error="${code}"` },
  });
}

/**
 * Creates the secure router. It authenticates every request it is given and
 * answers 404 for secure paths without a handler.
 */
export function createSecureRouter(deps: AppDeps) {
  const { store, clock, metrics } = deps;

  function deny(code: "invalid_token" | "token_expired", message: string): HttpError {
    metrics?.secureRequest("denied", code);
    return unauthorized(code, message);
  }

  function authenticate(request: Request, url: URL): Principal {
    const keyText = findRequestApiKey(request, url);
    const token = findRequestToken(request, url);
    if (keyText === undefined || token === undefined) {
      throw deny("invalid_token", "Missing API key or access token");
    }
    const apiKey = normalizeApiKey(keyText);
    const grant = apiKey !== undefined && isTokenShaped(token)
      ? store.findTokenGrant(hashSecret(token), hashSecret(apiKey))
      : undefined;
    if (grant === undefined) {
      throw deny("invalid_token", "Invalid access token or API key");
    }
    if (grant.expiresAt <= clock.now()) {
      throw deny("token_expired", "Access token expired: request a new one");
    }
    metrics?.secureRequest("allowed", "ok");
    return grant;
  }

  const routes: Routes<SecureContext> = {
    [CURRENT_TOKEN_PATH]: {
      GET(_request, { format, principal }) {
        const expiresIn = Math.max(0, Math.floor((principal.expiresAt - clock.now()) / 1000));
        return toResponse(format, "token_info", {
          email: principal.email,
          expires_at: new Date(principal.expiresAt).toISOString(),
          expires_in: expiresIn,
        });
      },
      DELETE(_request, { principal, requestId, clientAddress }) {
        store.revokeToken(principal.tokenId, clock.now());
        deps.logger.info("token revoked", {
          event: "token_revoked",
          request_id: requestId,
          user_id: principal.userId,
          key_id: principal.apiKeyId,
          client: clientAddress,
        });
        return new Response(null, { status: 204 });
      },
    },
  };

  return function routeSecure(
    request: Request,
    path: string,
    context: RequestContext,
  ): Response | Promise<Response> {
    const principal = authenticate(request, context.url);
    context.apiKeyId = principal.apiKeyId;
    const handler = findRoute(routes, request.method, path);
    if (!handler) {
      throw new HttpError(404, "not_found", "No secure endpoint at this path");
    }
    return handler(request, { ...context, principal });
  };
}
