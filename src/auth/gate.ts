/**
 * The gate: the one place that decides who a request comes from. A secure
 * request needs an API key and an access token issued with it; any other
 * request that keygate does not answer itself needs a live API key of an
 * enabled user.
 *
 * The secure router, the API-key check before 404, the upstream proxy and
 * forward-auth (`/api/userservice/verify`) all go through it, so they cannot
 * disagree. It is also the one place that notes a successful authentication
 * as a use of the key (`key list` shows the last use); logins note theirs in
 * the token router.
 *
 * @module
 */
import { findRequestApiKey } from "./api_key.ts";
import type { Clock } from "../platform/clock.ts";
import { isTokenShaped, normalizeApiKey } from "./credentials.ts";
import { AuthError } from "./errors.ts";
import { createGrantCache, createKeyHolderCache } from "./grant_cache.ts";
import type { KeyUsageRecorder } from "./key_usage.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { KeyHolder, Store, TokenGrant } from "../store/store.ts";

/** Who made an authenticated request. */
export interface Identity {
  userId: number;
  email: string;
  apiKeyId: number;
}

/** The authenticated caller of a secure request: its identity and its token. */
export type Principal = TokenGrant;

/** What the gate needs. */
export interface GateDeps {
  store: Store;
  clock: Clock;
  /** Counts secure requests allowed and denied (by reason). */
  metrics?: Pick<Metrics, "secureRequest"> & Partial<Pick<Metrics, "watchCache">>;
  /** Where each successful authentication is noted as a use of its key (last use). */
  keyUsage?: Pick<KeyUsageRecorder, "record">;
  /** Entries per cache (`--grant-cache-size`); 0: none, every lookup reads the store. */
  grantCacheSize?: number;
}

/** What the gate is asked about: the query to read and who asks (for the key's last use). */
export interface GateTarget {
  /** The request's query parameters (`api_key`, `api_token`). */
  query: URLSearchParams;
  /** The client's address, recorded as the key's last use on success. */
  clientAddress: string;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The access token a request carries: `api_token` in the query, or `Authorization: Bearer`. */
export function findRequestToken(request: Request, query: URLSearchParams): string | undefined {
  const inQuery = query.get("api_token")?.trim();
  if (inQuery) return inQuery;
  const authorization = request.headers.get("authorization");
  return authorization ? BEARER.exec(authorization)?.[1] : undefined;
}

/** Identity headers a backend receives; any a client sends are removed first. */
export const IDENTITY_HEADERS = {
  user: "x-keygate-user",
  email: "x-keygate-email",
  keyId: "x-keygate-key-id",
} as const;

/** Printable ASCII but `%`: sent as it is. */
const AS_IS = /^[\x20-\x24\x26-\x7e]*$/;

/**
 * The identity as `X-Keygate-User` (user id), `X-Keygate-Email` and
 * `X-Keygate-Key-Id`. An e-mail with non-ASCII characters is percent-encoded
 * (UTF-8), since header values are bytes; so is one with a `%`, so that
 * percent-decoding the header always gives the address (`a%C3%A9@…` is an
 * address of its own, not `aé@…`).
 */
export function toIdentityHeaders(identity: Identity): [string, string][] {
  const email = AS_IS.test(identity.email) ? identity.email : encodeURI(identity.email);
  return [
    [IDENTITY_HEADERS.user, String(identity.userId)],
    [IDENTITY_HEADERS.email, email],
    [IDENTITY_HEADERS.keyId, String(identity.apiKeyId)],
  ];
}

/** Creates the gate over a store and a clock. */
export function createGate(deps: GateDeps) {
  const { store, clock, metrics } = deps;
  const findGrant = createGrantCache(
    store,
    deps.grantCacheSize,
    (cache) => metrics?.watchCache?.("grant", cache),
  );
  const findKeyHolder = createKeyHolderCache(
    store,
    deps.grantCacheSize,
    (cache) => metrics?.watchCache?.("key_holder", cache),
  );

  const { deny, admit, admitKey } = createVerdicts(deps);

  /**
   * Authenticates by API key alone (`api_key` query parameter or `X-Api-Key`).
   *
   * @throws {AuthError} `invalid_api_key` for a missing, unknown, revoked,
   * disabled or expired key, or one whose user is disabled.
   */
  function authenticateKey(request: Request, target: GateTarget): KeyHolder | Promise<KeyHolder> {
    const keyText = findRequestApiKey(request, target.query);
    const apiKey = keyText === undefined ? undefined : normalizeApiKey(keyText);
    const now = clock.now();
    const holder = apiKey === undefined ? undefined : findKeyHolder(apiKey, now);
    // A cached holder is answered synchronously; a miss waits for the store.
    if (holder instanceof Promise) return holder.then((found) => admitKey(found, target, now));
    return admitKey(holder, target, now);
  }

  /**
   * Authenticates an OAuth client (RFC 6749 section 2.3.1): `clientId` is
   * the API key's id and `secret` the key. The key is found by its digest as
   * for {@link authenticateKey}; the id must then name that same key.
   *
   * @throws {AuthError} `invalid_api_key` for credentials that do not name a
   * usable key, without saying which part was wrong.
   */
  function authenticateClient(
    clientId: string,
    secret: string,
    target: GateTarget,
  ): KeyHolder | Promise<KeyHolder> {
    const apiKey = normalizeApiKey(secret);
    const now = clock.now();
    const holder = apiKey === undefined ? undefined : findKeyHolder(apiKey, now);
    const check = (found: KeyHolder | undefined) => {
      if (found === undefined || String(found.apiKeyId) !== clientId) {
        throw new AuthError(
          "invalid_api_key",
          "Invalid client credentials: client_id is the key's id, client_secret the key",
        );
      }
      return admitKey(found, target, now);
    };
    return holder instanceof Promise ? holder.then(check) : check(holder);
  }

  /**
   * Authenticates a secure request: API key + access token, looked up through
   * the grant cache (synchronously on a hit; two hashes and one indexed read
   * on a miss), and an expiry check.
   *
   * @throws {AuthError} `invalid_token` or `token_expired`.
   */
  function authenticateToken(request: Request, target: GateTarget): Principal | Promise<Principal> {
    const keyText = findRequestApiKey(request, target.query);
    const token = findRequestToken(request, target.query);
    if (keyText === undefined || token === undefined) {
      throw deny("invalid_token", "Missing API key or access token");
    }
    const apiKey = normalizeApiKey(keyText);
    const now = clock.now();
    const grant = apiKey !== undefined && isTokenShaped(token)
      ? findGrant(apiKey, token, now)
      : undefined;
    if (grant instanceof Promise) return grant.then((found) => admit(found, target, now));
    return admit(grant, target, now);
  }

  /** The gate's rule: secure paths need key + token, all others the key. */
  function authenticate(
    request: Request,
    target: GateTarget,
    secure: boolean,
  ): Identity | Promise<Identity> {
    return secure ? authenticateToken(request, target) : authenticateKey(request, target);
  }

  /** The caches' statistics (hits, misses, entries evicted by scope), for tests and metrics. */
  function readCacheStats() {
    return { grants: findGrant.stats(), keyHolders: findKeyHolder.stats() };
  }

  return { authenticateKey, authenticateClient, authenticateToken, authenticate, readCacheStats };
}

/** The gate's functions. */
export type Gate = ReturnType<typeof createGate>;

/**
 * The gate's verdicts on what a lookup found (or not) at `now`: counted as allowed or
 * denied, and noted as a use of the key when admitted.
 */
function createVerdicts(deps: Pick<GateDeps, "metrics" | "keyUsage">) {
  const { metrics, keyUsage } = deps;

  function deny(code: "invalid_token" | "token_expired", message: string): AuthError {
    metrics?.secureRequest("denied", code);
    return new AuthError(code, message);
  }

  /** The verdict on a key's holder. */
  function admitKey(holder: KeyHolder | undefined, target: GateTarget, now: number): KeyHolder {
    if (holder === undefined) {
      throw new AuthError("invalid_api_key", "Missing or invalid API key");
    }
    keyUsage?.record(holder.apiKeyId, target.clientAddress, now);
    return holder;
  }

  /** The verdict on a grant. */
  function admit(grant: TokenGrant | undefined, target: GateTarget, now: number): Principal {
    if (grant === undefined) {
      throw deny("invalid_token", "Invalid access token or API key");
    }
    if (grant.expiresAt <= now) {
      throw deny("token_expired", "Access token expired: request a new one");
    }
    metrics?.secureRequest("allowed", "ok");
    keyUsage?.record(grant.apiKeyId, target.clientAddress, now);
    return grant;
  }

  return { deny, admit, admitKey };
}
