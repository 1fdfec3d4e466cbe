/**
 * Secure routes: paths with a `secure` segment, for callers with an API key
 * and an access token. The listener authenticates once, through the gate,
 * before the table is read (app.ts); a handler receives the principal in its
 * context. keygate's own secure endpoint is here; the application's
 * (`secureRoutes`) join it in the same table.
 *
 * @module
 */
import type { RequestContext, SecureContext } from "../context.ts";
import { createRevocation } from "../../auth/revocation.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";
import type { Store } from "../../store/store.ts";
import { parseRequestPath } from "../paths.ts";
import { toResponse } from "../respond.ts";
import type { RouteHandler, Routes } from "../route.ts";
import type { Route } from "../route_table.ts";

export type { Principal } from "../../auth/gate.ts";

/** The built-in secure endpoint describing (GET) or revoking (DELETE) the caller's token. */
export const CURRENT_TOKEN_PATH = "/api/secure/userservice/tokens/current";

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

/** What the secure routes need. */
export interface SecureRouteDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** The application's own secure endpoints (see `AppDeps.secureRoutes`). */
  secureRoutes?: Routes<SecureContext>;
}

/**
 * The secure routes: keygate's token endpoint for its caller's own token
 * (describe, revoke) and the application's `secureRoutes`, every one for
 * callers with a token.
 *
 * @throws {TypeError} at start-up, for an application route that could never be reached or
 * would shadow keygate's.
 */
export function createSecureRoutes(deps: SecureRouteDeps): Route<RequestContext>[] {
  const { store, clock } = deps;
  const revocation = createRevocation({ store, clock });
  const appRoutes = deps.secureRoutes ?? {};
  checkSecureRoutes(appRoutes, [CURRENT_TOKEN_PATH]);

  const own: Routes<SecureContext> = {
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
  return [...toSecureRows(own), ...toSecureRows(appRoutes)];
}

/**
 * Rows for the table from routes by path and method. The listener runs a secure row's
 * handler only once the gate has set the context's principal.
 */
function toSecureRows(routes: Routes<SecureContext>): Route<RequestContext>[] {
  return Object.entries(routes).flatMap(([path, byMethod]) =>
    Object.entries(byMethod).map(([method, handle]) => ({
      method,
      path,
      caller: "token" as const,
      handle: handle as RouteHandler<SecureContext> as RouteHandler<RequestContext>,
    }))
  );
}
