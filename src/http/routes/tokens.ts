/**
 * `POST /api/userservice/tokens`: reads the `auth_request`, hands its
 * credentials to the login flow (src/auth/login.ts), and answers the new
 * access token in the negotiated format.
 *
 * @module
 */
import { findRequestApiKey } from "../../auth/api_key.ts";
import { createLogin, toCredentials } from "../../auth/login.ts";
import { createThrottle } from "../../auth/throttle.ts";
import { parseAuthRequest } from "../../formats/auth_request.ts";
import { readDocument } from "../body.ts";
import type { AppDeps, RequestContext } from "../context.ts";
import { toResponse } from "../respond.ts";
import { findRoute, type RouteHandler, type Routes } from "../route.ts";

/** The path of the token endpoint. */
export const TOKENS_PATH = "/api/userservice/tokens";

/**
 * Creates the token router: returns a response for the token paths, or
 * `undefined` for any other path.
 */
export function createTokenRouter(deps: AppDeps) {
  const { store, clock } = deps;
  const login = createLogin({
    store,
    hasher: deps.hasher,
    clock,
    throttle: createThrottle({ store, clock, rules: deps.throttleRules }),
    defaultTimeoutSeconds: deps.defaultTimeoutSeconds,
  });

  const issue: RouteHandler<RequestContext> = async (request, context) => {
    const body = await readDocument(request, parseAuthRequest, { timeoutMs: deps.bodyTimeoutMs });
    const credentials = toCredentials(body, findRequestApiKey(request, context.query));
    const issued = await login({
      credentials,
      clientAddress: context.clientAddress,
      signal: request.signal, // a client that has gone away gives its queue place up
    });
    context.apiKeyId = issued.apiKeyId;
    deps.keyUsage?.record(issued.apiKeyId, context.clientAddress);
    deps.metrics?.tokenIssued();
    deps.logger.info("token issued", {
      event: "token_issued",
      request_id: context.requestId,
      user_id: issued.userId,
      key_id: issued.apiKeyId,
      client: context.clientAddress,
    });
    return toResponse(context.format, "auth_response", { access_token: issued.token });
  };

  const routes: Routes<RequestContext> = { [TOKENS_PATH]: { POST: issue } };

  return function routeToken(
    request: Request,
    path: string,
    context: RequestContext,
  ): Response | Promise<Response> | undefined {
    return findRoute(routes, request.method, path)?.(request, context);
  };
}
