/**
 * Secure requests: any path with a `secure` segment. The router authenticates
 * once (API key + access token: two hashes, one indexed read, an expiry
 * check; the gate notes the key's use in memory, no write), then dispatches to a
 * handler that receives the principal.
 *
 * @module
 */
import type { AppDeps, RequestContext, SecureContext } from "../context.ts";
import { HttpError } from "../errors.ts";
import { createGate, type Gate, type Principal } from "../../auth/gate.ts";
import { createRevocation } from "../../auth/revocation.ts";
import { parseRequestPath } from "../paths.ts";
import { toResponse } from "../respond.ts";
import { findRoute, type Routes } from "../route.ts";

export type { Principal } from "../../auth/gate.ts";

/** The built-in secure endpoint describing (GET) or revoking (DELETE) the caller's token. */
export const CURRENT_TOKEN_PATH = "/api/secure/userservice/tokens/current";

/**
 * Answers an authenticated secure request that no route matched (the
 * upstream proxy), or returns `undefined` to let it end in 404.
 */
export type SecureFallback = (
  request: Request,
  path: string,
  context: SecureContext,
) => Promise<Response> | undefined;

/** Options for {@link createSecureRouter}. */
export interface SecureRouterOptions {
  /** The gate to authenticate with; one over `deps` by default. */
  gate?: Gate;
  fallback?: SecureFallback;
}

/**
 * Checks the application's own secure routes: each path must be canonical
 * (as {@link parseRequestPath} gives it), secure, and not one of keygate's.
 *
 * @throws {TypeError} at start-up, for a route that could never be reached
 * or would shadow keygate's.
 */
export function checkSecureRoutes(routes: Routes<SecureContext>, builtIn: readonly string[]): void {
  for (const path of Object.keys(routes)) {
    const target = parseRequestPath(path);
    if (target.path !== path || !target.secure || target.format !== undefined) {
      throw new TypeError(
        `Invalid secure route "${path}": expected a canonical path with a "secure" segment`,
      );
    }
    if (builtIn.includes(path) || path.toLowerCase().startsWith("/api/secure/userservice/")) {
      throw new TypeError(`Invalid secure route "${path}": keygate serves this path itself`);
    }
  }
}

/** Expiry times as ISO 8601 text, remembered: a token is asked about again and again. */
const isoTimes = new Map<number, string>();

function toIsoTime(ms: number): string {
  let text = isoTimes.get(ms);
  if (text === undefined) {
    text = new Date(ms).toISOString();
    if (isoTimes.size >= 10_000) isoTimes.clear();
    isoTimes.set(ms, text);
  }
  return text;
}

/**
 * Creates the secure router. It authenticates every request it is given,
 * then dispatches to keygate's own secure endpoints, the application's
 * `secureRoutes`, the fallback (the upstream proxy), or 404.
 */
export function createSecureRouter(deps: AppDeps, options: SecureRouterOptions = {}) {
  const { store, clock } = deps;
  const gate = options.gate ?? createGate(deps);
  const revocation = createRevocation({ store, clock });
  const appRoutes = deps.secureRoutes ?? {};
  checkSecureRoutes(appRoutes, [CURRENT_TOKEN_PATH]);

  const routes: Routes<SecureContext> = {
    [CURRENT_TOKEN_PATH]: {
      GET(_request, { format, principal }) {
        const expiresIn = Math.max(0, Math.floor((principal.expiresAt - clock.now()) / 1000));
        return toResponse(format, "token_info", {
          email: principal.email,
          expires_at: toIsoTime(principal.expiresAt),
          expires_in: expiresIn,
        });
      },
      async DELETE(_request, { principal, requestId, clientAddress }) {
        await revocation.revokeOwnToken(principal.tokenId, {
          apiKeyId: principal.apiKeyId,
          email: principal.email,
          clientAddress,
        });
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

  function dispatch(
    request: Request,
    path: string,
    context: RequestContext,
    principal: Principal,
  ): Response | Promise<Response> {
    context.apiKeyId = principal.apiKeyId;
    // The request's own context gains its principal (no copy: it is per request).
    const secureContext = context as SecureContext;
    secureContext.principal = principal;
    const handler = findRoute(routes, request.method, path) ??
      findRoute(appRoutes, request.method, path);
    if (handler) return handler(request, secureContext);
    const forwarded = options.fallback?.(request, path, secureContext);
    if (forwarded) return forwarded;
    throw new HttpError(404, "not_found", "No secure endpoint at this path");
  }

  return function routeSecure(
    request: Request,
    path: string,
    context: RequestContext,
  ): Response | Promise<Response> {
    const principal = gate.authenticateToken(request, context);
    // A cache hit is answered synchronously; a miss waits for the store.
    if (principal instanceof Promise) {
      return principal.then((found) => dispatch(request, path, context, found));
    }
    return dispatch(request, path, context, principal);
  };
}
