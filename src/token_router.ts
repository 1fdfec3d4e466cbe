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
import { writeWhenUnlocked } from "./locked_writes.ts";
import { toResponse } from "./respond.ts";
import { findRoute, type RouteHandler, type Routes } from "./route.ts";
import {
  createThrottle,
  type ThrottleSubjects,
  toAccountSubject,
  toClientSubject,
} from "./throttle.ts";

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

/** The uniform answer to every credential failure. */
export function invalidCredentials(): HttpError {
  return new HttpError(401, "invalid_credentials", "Invalid e-mail, password or API key");
}

/**
 * Creates the token router: returns a response for the token paths, or
 * `undefined` for any other path.
 */
export function createTokenRouter(deps: AppDeps) {
  const { store, hasher, clock } = deps;
  const throttle = createThrottle({ store, clock, rules: deps.throttleRules });

  const issue: RouteHandler<RequestContext> = async (request, context) => {
    const body = await readDocument(request, parseAuthRequest, { timeoutMs: deps.bodyTimeoutMs });
    const credentials = toCredentials(body, findRequestApiKey(request, context.url));

    const user = store.findUserByEmail(credentials.email);
    const key = store.findApiKeyByHash(hashSecret(credentials.apiKey));
    const keyOfUser = user !== undefined && !user.disabled && key !== undefined &&
      key.revokedAt === null && key.userId === user.id;
    // The account counter only exists for a live key of the e-mail's own user (src/throttle.ts).
    const subjects: ThrottleSubjects = {
      client: toClientSubject(context.clientAddress),
      account: keyOfUser ? toAccountSubject(key.id) : undefined,
    };
    try {
      throttle.check(subjects);
    } catch (error) {
      deps.logger.warn("login throttled", {
        event: "login_throttled",
        request_id: context.requestId,
        key_id: keyOfUser ? key.id : undefined,
        client: context.clientAddress,
      });
      throw error;
    }
    const verified = await hasher.verify(
      user && !user.disabled ? user.passwordHash : undefined,
      credentials.password,
    );
    if (!verified || !keyOfUser) {
      await throttle.recordFailure(subjects);
      deps.logger.info("login failed", {
        event: "login_failed",
        request_id: context.requestId,
        key_id: keyOfUser ? key.id : undefined,
        client: context.clientAddress,
      });
      throw invalidCredentials();
    }
    await throttle.recordSuccess(subjects);
    context.apiKeyId = key.id;

    const token = generateToken();
    const issuedAt = clock.now();
    const timeout = user.tokenTimeoutSeconds ?? deps.defaultTimeoutSeconds;
    await writeWhenUnlocked(store, () =>
      store.issueToken({
        tokenHash: hashSecret(token),
        userId: user.id,
        apiKeyId: key.id,
        issuedAt,
        expiresAt: issuedAt + timeout * 1000,
        maxLiveTokens: MAX_LIVE_TOKENS,
      }));
    deps.logger.info("token issued", {
      event: "token_issued",
      request_id: context.requestId,
      user_id: user.id,
      key_id: key.id,
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
