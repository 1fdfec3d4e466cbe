/**
 * `POST /api/userservice/tokens`: e-mail + password + API key in, one new
 * access token out.
 *
 * Every credential failure (unknown e-mail, wrong password, unknown, revoked
 * or foreign key, disabled user) gets the same 401 after the same work: an
 * unknown or disabled user is verified against a dummy hash.
 *
 * @module
 */
import { type AuthRequest, parseAuthRequest } from "./auth_request.ts";
import { findRequestApiKey } from "./api_key.ts";
import { readDocument } from "./body.ts";
import type { AppDeps, RequestContext } from "./context.ts";
import { generateToken, hashSecret, normalizeApiKey } from "./credentials.ts";
import { HttpError } from "./errors.ts";
import { toResponse } from "./respond.ts";
import { findRoute, type RouteHandler, type Routes } from "./route.ts";

/** The path of the token endpoint. */
export const TOKENS_PATH = "/api/userservice/tokens";
/** Longest e-mail address accepted (RFC 5321's path limit). */
export const MAX_EMAIL_LENGTH = 254;
/** Longest password accepted, in UTF-8 bytes; checked before any hashing. */
export const MAX_PASSWORD_BYTES = 1024;
/** Live tokens per user and API key; issuing one more revokes the oldest. */
export const MAX_LIVE_TOKENS = 100;

/** Credentials of a token request, checked for shape and normalised. */
export interface Credentials {
  /** Lower-cased. */
  email: string;
  password: string;
  /** Lower-cased UUID. */
  apiKey: string;
}

function invalid(message: string): HttpError {
  return new HttpError(400, "invalid_request", message);
}

const utf8 = new TextEncoder();

/**
 * Combines the body's fields with an API key from the query string or
 * header, and checks every length before any hashing.
 *
 * @throws {HttpError} 400 for a missing, conflicting or malformed field.
 */
export function toCredentials(body: AuthRequest, requestKey: string | undefined): Credentials {
  if (
    body.apiKey !== undefined && requestKey !== undefined &&
    body.apiKey.toLowerCase() !== requestKey.toLowerCase()
  ) {
    throw invalid("Invalid auth_request: api_key is given twice with different values");
  }
  const keyText = body.apiKey ?? requestKey;
  if (keyText === undefined) throw invalid("Invalid auth_request: missing api_key");
  const apiKey = normalizeApiKey(keyText);
  if (apiKey === undefined) throw invalid("Invalid auth_request: api_key must be a UUID");
  if (body.email === "" || body.email.length > MAX_EMAIL_LENGTH) {
    throw invalid(`Invalid auth_request: email must be 1 to ${MAX_EMAIL_LENGTH} characters`);
  }
  if (body.password === "" || utf8.encode(body.password).byteLength > MAX_PASSWORD_BYTES) {
    throw invalid(`Invalid auth_request: password must be 1 to ${MAX_PASSWORD_BYTES} bytes`);
  }
  return { email: body.email.toLowerCase(), password: body.password, apiKey };
}

/**
 * The uniform answer to every credential failure. `detail` (such as
 * `wrong_password`) goes only to the audit log, never to the caller.
 */
export function invalidCredentials(detail?: string): HttpError {
  return new HttpError(401, "invalid_credentials", "Invalid e-mail, password or API key", {
    cause: detail,
  });
}

/** Which credential check failed, for the audit log; `undefined` when all passed. */
function findCredentialFailure(
  user: { id: number; disabled: boolean } | undefined,
  key: { userId: number; revokedAt: number | null } | undefined,
  verified: boolean,
): string | undefined {
  if (!user) return "unknown_user";
  if (user.disabled) return "disabled_user";
  if (!verified) return "wrong_password";
  if (!key) return "unknown_key";
  if (key.revokedAt !== null) return "revoked_key";
  if (key.userId !== user.id) return "foreign_key";
  return undefined;
}

/**
 * Creates the token router: returns a response for the token paths, or
 * `undefined` for any other path.
 */
export function createTokenRouter(deps: AppDeps) {
  const { store, hasher, clock } = deps;

  const issue: RouteHandler<RequestContext> = async (request, context) => {
    const body = await readDocument(request, parseAuthRequest);
    const credentials = toCredentials(body, findRequestApiKey(request, context.url));

    const user = store.findUserByEmail(credentials.email);
    const key = store.findApiKeyByHash(hashSecret(credentials.apiKey));
    const verified = await hasher.verify(
      user && !user.disabled ? user.passwordHash : undefined,
      credentials.password,
    );
    const failure = findCredentialFailure(user, key, verified);
    if (failure !== undefined || !user || !key) throw invalidCredentials(failure);
    context.apiKeyId = key.id;

    const token = generateToken();
    const issuedAt = clock.now();
    const timeout = user.tokenTimeoutSeconds ?? deps.defaultTimeoutSeconds;
    store.issueToken({
      tokenHash: hashSecret(token),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt,
      expiresAt: issuedAt + timeout * 1000,
      maxLiveTokens: MAX_LIVE_TOKENS,
    });
    deps.metrics?.tokenIssued();
    deps.logger.info("token issued", {
      event: "token_issued",
      request_id: context.requestId,
      user_id: user.id,
      key_id: key.id,
      client: context.clientAddress,
    });
    return toResponse(context.format, "auth_response", { access_token: token });
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
