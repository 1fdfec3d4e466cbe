/**
 * The login flow: e-mail + password + API key in, one new access token out.
 *
 * Every credential failure (unknown e-mail, wrong password, unknown, revoked,
 * disabled, expired or foreign key, disabled user) throws the same
 * `invalid_credentials` after the same work: an unknown or disabled user is
 * verified against a dummy hash. Each failure and each issued token is
 * recorded in the audit log, in the transaction that counts the failure or
 * stores the token.
 *
 * Failed logins are throttled per API key and per client address
 * (throttle.ts): while throttled, `too_many_attempts` before any password check.
 *
 * While the password pool would refuse the check (its expected wait is beyond
 * the bound), a login is refused first, with `service_busy` and the pool's
 * Retry-After, before it reads anything: the same answer after the same
 * (next to no) work for a known user and an unknown one, and a refusal storm
 * costs the database nothing.
 *
 * @module
 */
import { type Clock, MAX_TIME_MS } from "../platform/clock.ts";
import {
  PasswordCheckAborted,
  type PasswordHasher,
  PasswordPoolBusy,
  POOL_BUSY_MESSAGE,
} from "../passwords/passwords.ts";
import type { ApiKey, Store, User } from "../store/store.ts";
import {
  isLoginEmailSized,
  isPasswordSized,
  MAX_EMAIL_LENGTH,
  MAX_PASSWORD_BYTES,
  normalizeEmail,
} from "./account_rules.ts";
import { toKeyRef, toUserRef } from "./audit.ts";
import { generateToken, hashSecret, normalizeApiKey } from "./credentials.ts";
import { AuthError } from "./errors.ts";
import { StoreBlocked, StoreConflict } from "../store/errors.ts";
import { isKeyUsable, toKeyStatus } from "./key_status.ts";
import {
  type Throttle,
  type ThrottleSubjects,
  toAccountSubject,
  toClientSubject,
} from "./throttle.ts";

/** Live tokens per user and API key; issuing one more revokes the oldest. */
export const MAX_LIVE_TOKENS = 100;

/** Credentials of a login, checked for shape and normalised. */
export interface Credentials {
  /** Lower-cased. */
  email: string;
  password: string;
  /** Lower-cased UUID. */
  apiKey: string;
}

/** A login's fields as a client sent them (the body's, and a key from elsewhere in the request). */
export interface LoginFields {
  email: string;
  password: string;
  /** The key in the body, if any. */
  apiKey?: string;
}

function invalid(message: string): AuthError {
  return new AuthError("invalid_request", message);
}

/**
 * Combines a login's fields with an API key sent beside them (query string
 * or header), and checks every size before any hashing.
 *
 * @throws {AuthError} `invalid_request` for a missing, conflicting or malformed field.
 */
export function toCredentials(fields: LoginFields, requestKey: string | undefined): Credentials {
  if (
    fields.apiKey !== undefined && requestKey !== undefined &&
    fields.apiKey.toLowerCase() !== requestKey.toLowerCase()
  ) {
    throw invalid("Invalid auth_request: api_key is given twice with different values");
  }
  const keyText = fields.apiKey ?? requestKey;
  if (keyText === undefined) throw invalid("Invalid auth_request: missing api_key");
  const apiKey = normalizeApiKey(keyText);
  if (apiKey === undefined) throw invalid("Invalid auth_request: api_key must be a UUID");
  if (!isLoginEmailSized(fields.email)) {
    throw invalid(`Invalid auth_request: email must be 1 to ${MAX_EMAIL_LENGTH} characters`);
  }
  if (!isPasswordSized(fields.password)) {
    throw invalid(`Invalid auth_request: password must be 1 to ${MAX_PASSWORD_BYTES} bytes`);
  }
  return { email: normalizeEmail(fields.email), password: fields.password, apiKey };
}

/**
 * The uniform answer to every credential failure. `detail` (such as
 * `wrong_password`) goes only to the audit log and server logs, never to the caller.
 */
export function invalidCredentials(detail?: string): AuthError {
  return new AuthError("invalid_credentials", "Invalid e-mail, password or API key", { detail });
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

/** What {@link createLogin} needs. */
export interface LoginDeps {
  store: Store;
  hasher: Pick<PasswordHasher, "verify" | "findRefusal">;
  clock: Clock;
  throttle: Throttle;
  /** Token lifetime for users without their own timeout. */
  defaultTimeoutSeconds: number;
}

/** One login attempt. */
export interface LoginAttempt {
  credentials: Credentials;
  /** The client's address: the throttle's subject and the audit log's. */
  clientAddress: string;
  /** Aborts when the client goes away: the password check gives its queue place up. */
  signal?: AbortSignal;
}

/** A successful login. */
export interface Login {
  /** The new access token; shown once, stored only as its digest. */
  token: string;
  tokenId: number;
  userId: number;
  apiKeyId: number;
}

/** The password check, with the pool's own errors turned into the domain's. */
async function verifyPassword(
  hasher: Pick<PasswordHasher, "verify">,
  passwordHash: string | undefined,
  attempt: LoginAttempt,
): Promise<boolean> {
  try {
    return await hasher.verify(passwordHash, attempt.credentials.password, attempt.signal);
  } catch (error) {
    throw toHasherError(error);
  }
}

/**
 * The password pool's own errors as the domain's (`request_aborted`, `service_busy` with the
 * pool's Retry-After); anything else as it is. Also used by the portal's password checks.
 */
export function toHasherError(error: unknown): unknown {
  if (error instanceof PasswordCheckAborted) {
    return new AuthError("request_aborted", error.message, { cause: error });
  }
  if (error instanceof PasswordPoolBusy) {
    return new AuthError("service_busy", error.message, {
      retryAfterSeconds: error.retryAfterSeconds,
      cause: error,
    });
  }
  return error;
}

/**
 * `service_busy` now, before any read, when the password pool would refuse the check. Also used
 * by the portal's password checks.
 */
export function refuseIfBusy(hasher: Pick<PasswordHasher, "findRefusal">): void {
  const retryAfterSeconds = hasher.findRefusal?.();
  if (retryAfterSeconds !== undefined) {
    throw new AuthError("service_busy", POOL_BUSY_MESSAGE, { retryAfterSeconds });
  }
}

/** Creates the login flow. */
export function createLogin(deps: LoginDeps): (attempt: LoginAttempt) => Promise<Login> {
  const { store, hasher, clock, throttle } = deps;

  return async function login(attempt) {
    const { credentials, clientAddress } = attempt;
    refuseIfBusy(hasher);
    // The token's issue time is when the user row is read, before the slow
    // password check: a cutoff written while the check runs (password change,
    // revoke-all, disable) then covers the token this request produces.
    const readAt = clock.now();
    // One read: the user, the key, and the counters the throttle checks before the password
    // check (no round trip of their own).
    const client = toClientSubject(clientAddress);
    const counters = throttle.findReadFirst(client);
    const { user, key, failures: found } = await store.findUserAndKey(
      credentials.email,
      hashSecret(credentials.apiKey),
      counters,
    );
    // The account counter exists only for a usable key of the e-mail's own, enabled user
    // (throttle.ts); every failure counts toward the client address's counter.
    const subjects: ThrottleSubjects = {
      client,
      account: user !== undefined && !user.disabled && key !== undefined &&
          key.userId === user.id && isKeyUsable(key, readAt)
        ? toAccountSubject(key.id)
        : undefined,
    };
    // Before any password check, for right and wrong alike.
    throttle.checkRead(subjects, { now: counters.now, found });
    const verified = await verifyPassword(
      hasher,
      user && !user.disabled ? user.passwordHash : undefined,
      attempt,
    );
    // Again after the slow check: requests that were in flight together all passed the
    // first check, and the failures of those that finished first may have blocked this
    // one meanwhile. A blocked request gets the same answer, right password or wrong: a
    // failure checks here, a success in the transaction that stores its token.
    const failure = findCredentialFailure(user, key, verified, clock.now());
    if (failure !== undefined || !user || !key) {
      await throttle.check(subjects);
      // One transaction per failure, after an argon2 verification that costs far more:
      // the audit row and the brute-force counters.
      await throttle.recordFailure(subjects, {
        at: clock.now(),
        actor: key ? toKeyRef(key.id) : "anonymous",
        action: "login.failed",
        subject: user ? toUserRef(user.email) : "user:unknown",
        detail: { reason: failure ?? "unknown", client: clientAddress },
      });
      throw invalidCredentials(failure);
    }

    const token = generateToken();
    // Never before the user's cutoff (which may be at most 1 ms ahead, see docs/operations.md).
    const issuedAt = Math.max(readAt, user.tokensValidFrom);
    const timeout = user.tokenTimeoutSeconds ?? deps.defaultTimeoutSeconds;
    const tokenId = await insertTokenUnlessChanged(store, {
      tokenHash: hashSecret(token),
      userId: user.id,
      apiKeyId: key.id,
      issuedAt,
      // A timeout stored before durations were capped cannot push the expiry past a Date's range.
      expiresAt: Math.min(issuedAt + timeout * 1000, MAX_TIME_MS),
      maxLiveTokens: MAX_LIVE_TOKENS,
      userCutoff: user.tokensValidFrom,
    }, {
      // The store adds the token's id to the detail as token_id.
      audit: {
        at: clock.now(),
        actor: toKeyRef(key.id),
        action: "token.issued",
        subject: toUserRef(user.email),
        detail: { client: clientAddress },
      },
      clearLoginFailures: throttle.findClearedOnSuccess(subjects),
      unlessBlocked: throttle.findCheckedOnSuccess(subjects),
    }, throttle);
    return { token, tokenId, userId: user.id, apiKeyId: key.id };
  };
}

/**
 * Stores the login's token unless its user changed while the password was checked (a password
 * change, revoke-all or disable committed meanwhile): then the login fails like any other, with
 * the uniform 401, and nothing is counted against the caller. A counter that blocks the login
 * by then gets the throttle's answer (429), as for a wrong password.
 */
async function insertTokenUnlessChanged(
  store: Store,
  token: Parameters<Store["insertToken"]>[0],
  change: Parameters<Store["insertToken"]>[1],
  throttle: Pick<Throttle, "toBlockedError">,
): Promise<number> {
  try {
    return await store.insertToken(token, change);
  } catch (error) {
    if (error instanceof StoreConflict) throw invalidCredentials("user_changed");
    if (error instanceof StoreBlocked) throw throttle.toBlockedError(error.blockedUntil);
    throw error;
  }
}
