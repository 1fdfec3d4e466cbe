/**
 * `POST /api/userservice/tokens`: e-mail + password + API key in, one new
 * access token out.
 *
 * Every credential failure (unknown e-mail, wrong password, unknown, revoked,
 * disabled, expired or foreign key, disabled user) gets the same 401 after
 * the same work: an unknown or disabled user is verified against a dummy
 * hash. Each failure and each issued token is recorded in the audit log.
 *
 * Failed logins are throttled per API key and per client address
 * (src/throttle.ts): while throttled, the answer is 429 before any password
 * check. Writes wait for another process's lock without blocking
 * (src/locked_writes.ts).
 *
 * @module
 */
import { type AuthRequest, parseAuthRequest } from "../../formats/auth_request.ts";
import { findRequestApiKey } from "../../auth/api_key.ts";
import { readDocument } from "../body.ts";
import type { AppDeps, RequestContext } from "../context.ts";
import { generateToken, hashSecret, normalizeApiKey } from "../../auth/credentials.ts";
import { HttpError } from "../errors.ts";
import { toKeyRef, toUserRef } from "../../auth/audit.ts";
import { isKeyUsable, toKeyStatus } from "../../auth/key_status.ts";
import { writeWhenUnlocked } from "../../store/sqlite/locked_writes.ts";
import { toResponse } from "../respond.ts";
import { findRoute, type RouteHandler, type Routes } from "../route.ts";
import type { ApiKey, User } from "../../store/sqlite/store.ts";
import {
  createThrottle,
  type ThrottleSubjects,
  toAccountSubject,
  toClientSubject,
} from "../../auth/throttle.ts";

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

/**
 * Which credential check failed, for the audit log and logs (never the
 * response); `undefined` when all passed.
 */
function findCredentialFailure(
  user: Pick<User, "id" | "disabled"> | undefined,
  key: Pick<ApiKey, "userId" | "revokedAt" | "disabledAt" | "expiresAt"> | undefined,
  verified: boolean,
  now: number,
): string | undefined {
  if (!user) return "unknown_user";
  if (user.disabled) return "disabled_user";
  if (!verified) return "wrong_password";
  if (!key) return "unknown_key";
  if (key.userId !== user.id) return "foreign_key";
  if (!isKeyUsable(key, now)) return `key_${toKeyStatus(key, now)}`;
  return undefined;
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

    // The token's issue time is when the user row is read, before the slow
    // password check: a cutoff written while the check runs (password change,
    // revoke-all, disable) then covers the token this request produces.
    const readAt = clock.now();
    const user = store.findUserByEmail(credentials.email);
    const key = store.findApiKeyByHash(hashSecret(credentials.apiKey));
    // The account counter exists only for a usable key of the e-mail's own, enabled user
    // (src/throttle.ts); every failure counts toward the client address's counter.
    const subjects: ThrottleSubjects = {
      client: toClientSubject(context.clientAddress),
      account: user !== undefined && !user.disabled && key !== undefined &&
          key.userId === user.id && isKeyUsable(key, readAt)
        ? toAccountSubject(key.id)
        : undefined,
    };
    throttle.check(subjects); // 429 before any password check, for right and wrong alike
    const verified = await hasher.verify(
      user && !user.disabled ? user.passwordHash : undefined,
      credentials.password,
      request.signal, // a client that has gone away gives its queue place up
    );
    // Again after the slow check: requests that were in flight together all passed the
    // first check, and the failures of those that finished first may have blocked this
    // one meanwhile. A blocked request gets the same 429, right password or wrong.
    throttle.check(subjects);
    const failure = findCredentialFailure(user, key, verified, clock.now());
    if (failure !== undefined || !user || !key) {
      // One transaction per failure, after an argon2 verification that costs far more:
      // the audit row and the brute-force counters.
      await writeWhenUnlocked(store, () =>
        store.transaction(() => {
          store.appendAudit({
            at: clock.now(),
            actor: key ? toKeyRef(key.id) : "anonymous",
            action: "login.failed",
            subject: user ? toUserRef(user.email) : "user:unknown",
            detail: { reason: failure ?? "unknown", client: context.clientAddress },
          });
          throttle.recordFailure(subjects);
        }));
      throw invalidCredentials(failure);
    }
    context.apiKeyId = key.id;

    const token = generateToken();
    // Never before the user's cutoff (which may be at most 1 ms ahead, see README).
    const issuedAt = Math.max(readAt, user.tokensValidFrom);
    const timeout = user.tokenTimeoutSeconds ?? deps.defaultTimeoutSeconds;
    await writeWhenUnlocked(store, () =>
      store.transaction(() => {
        const tokenId = store.issueToken({
          tokenHash: hashSecret(token),
          userId: user.id,
          apiKeyId: key.id,
          issuedAt,
          expiresAt: issuedAt + timeout * 1000,
          maxLiveTokens: MAX_LIVE_TOKENS,
        });
        store.appendAudit({
          at: clock.now(),
          actor: toKeyRef(key.id),
          action: "token.issued",
          subject: toUserRef(user.email),
          detail: { token_id: tokenId, client: context.clientAddress },
        });
        throttle.recordSuccess(subjects);
      }));
    deps.keyUsage?.record(key.id, context.clientAddress);
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
