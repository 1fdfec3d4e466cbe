/**
 * `POST /api/userservice/tokens`: reads the `auth_request`, hands its
 * credentials to the login flow (src/auth/login.ts), and answers the new
 * access token in the negotiated format. Anyone may call it: the document's
 * credentials are the login's to check. A failed login is counted and
 * logged here (`login_failed`, with the reason for the server's log only).
 *
 * @module
 */
import { findRequestApiKey } from "../../auth/api_key.ts";
import type { KeyUsageRecorder } from "../../auth/key_usage.ts";
import { createLogin, toCredentials } from "../../auth/login.ts";
import { createThrottle, type ThrottleRules } from "../../auth/throttle.ts";
import { parseAuthRequest } from "../../formats/auth_request.ts";
import type { PasswordHasher } from "../../passwords/passwords.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";
import type { Metrics } from "../../platform/metrics.ts";
import type { Store } from "../../store/store.ts";
import { readDocument } from "../body.ts";
import type { RequestContext } from "../context.ts";
import { toHttpError } from "../errors.ts";
import { toResponse } from "../respond.ts";
import type { Route } from "../route_table.ts";

/** The path of the token endpoint. */
export const TOKENS_PATH = "/api/userservice/tokens";

/** What the token endpoint needs. */
export interface TokenRouteDeps {
  store: Store;
  hasher: PasswordHasher;
  clock: Clock;
  logger: Logger;
  metrics: Pick<Metrics, "tokenIssued" | "loginFailed">;
  defaultTimeoutSeconds: number;
  throttleRules?: ThrottleRules;
  bodyTimeoutMs?: number;
  keyUsage?: Pick<KeyUsageRecorder, "record">;
}

/** The token endpoint's route. */
export function createTokenRoutes(deps: TokenRouteDeps): Route<RequestContext>[] {
  const { store, clock, logger, metrics } = deps;
  const login = createLogin({
    store,
    hasher: deps.hasher,
    clock,
    throttle: createThrottle({ store, clock, rules: deps.throttleRules }),
    defaultTimeoutSeconds: deps.defaultTimeoutSeconds,
  });

  async function issue(request: Request, context: RequestContext): Promise<Response> {
    const body = await readDocument(request, parseAuthRequest, { timeoutMs: deps.bodyTimeoutMs });
    const credentials = toCredentials(body, findRequestApiKey(request, context.query));
    const issued = await login({
      credentials,
      clientAddress: context.clientAddress,
      signal: request.signal, // a client that has gone away gives its queue place up
    });
    context.apiKeyId = issued.apiKeyId;
    deps.keyUsage?.record(issued.apiKeyId, context.clientAddress);
    metrics.tokenIssued();
    logger.info("token issued", {
      event: "token_issued",
      request_id: context.requestId,
      user_id: issued.userId,
      key_id: issued.apiKeyId,
      client: context.clientAddress,
    });
    return toResponse(context.format, "auth_response", { access_token: issued.token });
  }

  /**
   * Refusals of a full password queue come in storms (clients that re-send at once): one line a
   * second says how many there were, instead of one line each (the metric still counts each).
   */
  let busySince = -Infinity;
  let busyUnlogged = 0;

  async function issueOrLog(request: Request, context: RequestContext): Promise<Response> {
    try {
      return await issue(request, context);
    } catch (thrown) {
      const error = toHttpError(thrown);
      metrics.loginFailed(error.code);
      if (error.code === "service_busy") {
        const now = clock.now();
        if (now - busySince < 1000) {
          busyUnlogged++;
          throw thrown;
        }
        busySince = now;
      }
      const suppressed = error.code === "service_busy" && busyUnlogged > 0
        ? busyUnlogged
        : undefined;
      if (suppressed !== undefined) busyUnlogged = 0;
      logger.warn("login failed", {
        event: "login_failed",
        request_id: context.requestId,
        reason: error.code,
        detail: typeof error.cause === "string" ? error.cause : undefined,
        key_id: context.apiKeyId ?? null,
        client: context.clientAddress,
        // service_busy: refusals in the second before this one that were not logged each.
        also_refused: suppressed,
      });
      throw thrown;
    }
  }

  return [{ method: "POST", path: TOKENS_PATH, caller: "anyone", handle: issueOrLog }];
}
