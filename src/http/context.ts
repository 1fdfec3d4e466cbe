/**
 * What the app knows about a request once it has been routed, and the
 * dependencies the routers share.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { KeyUsageRecorder } from "../auth/key_usage.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { PasswordHasher } from "../passwords/passwords.ts";
import type { RequestPath } from "./paths.ts";
import type { Format } from "../formats/format.ts";
import type { Routes } from "./route.ts";
import type { Store } from "../store/store.ts";
import type { ThrottleRules } from "../auth/throttle.ts";
import type { Principal } from "../auth/gate.ts";
import type { Limiter } from "../auth/limiter.ts";
import type { LimitStatuses } from "../auth/limit_status.ts";
import type { ClientAuthMethod } from "./oauth_client.ts";
import type { PortalDeps } from "./portal/portal_request.ts";

/** Per-request facts, filled in as the request is handled. */
export interface RequestContext {
  requestId: string;
  /**
   * The listener's scheme, the `Host` keygate answered on, and the path and
   * query as sent. Read only the query and host from it: the path is
   * {@link target}'s (a URL parser normalises paths its own way).
   */
  readonly url: URL;
  /** {@link url}'s query parameters (read only). */
  readonly query: URLSearchParams;
  /** The canonical path, once read (`paths.ts`). */
  target?: Readonly<RequestPath>;
  /** The negotiated response format. */
  format: Format;
  /** The client's address, for throttling and logs. */
  clientAddress: string;
  /** The TCP peer's address (in proxy mode, the proxy's). */
  peerAddress: string;
  /**
   * The scheme the client used, as verified: the listener's own (https with
   * TLS), or `https` in proxy mode once the proxy has said so.
   */
  scheme: "http" | "https";
  /**
   * Proxy mode: the `X-Forwarded-For` chain a trusted proxy sent (the client
   * first); `undefined` outside proxy mode, where a client-sent chain is never believed.
   */
  forwardedFor?: string;
  /**
   * Proxy mode: whether `X-Forwarded-For` named a client outside `--trusted-proxies`;
   * otherwise {@link clientAddress} is a proxy's, shared by every such request.
   */
  clientNamed?: boolean;
  /** Id of the API key the request was authenticated with, once known (logged; never the key). */
  apiKeyId?: number;
  /**
   * How the caller authenticated as an OAuth client (introspection,
   * revocation), once it tried: its errors are then RFC 6749's JSON, not an
   * `error_response`, with a Basic challenge on 401 for `client_secret_basic`.
   */
  oauthClientAuth?: ClientAuthMethod;
  /** The limits the request was admitted (or refused) by, for its `RateLimit` headers. */
  limits?: LimitStatuses;
}

/** Context of a secure request, after authentication. */
export interface SecureContext extends RequestContext {
  principal: Principal;
}

/** Where and how to forward. */
export interface UpstreamOptions {
  /** `http:` or `https:` base URL; its path (if any) prefixes every forwarded path. */
  url: URL;
  /** How long the upstream may take to send its response headers. */
  timeoutMs: number;
  /** Remove the caller's credentials before forwarding (default `true`). */
  hideCredentials?: boolean;
}

/** Dependencies of the handler and its routers. */
export interface AppDeps {
  store: Store;
  hasher: PasswordHasher;
  clock: Clock;
  logger: Logger;
  /** Token lifetime for users without their own timeout. */
  defaultTimeoutSeconds: number;
  /** `["*"]` or exact origins allowed by CORS. Default `["*"]`. */
  corsOrigins?: readonly string[];
  /** Brute-force throttling of the token endpoint. Default `THROTTLE_RULES`. */
  throttleRules?: ThrottleRules;
  /** Deadline for a request body to arrive, in ms. Default `BODY_TIMEOUT_MS` (10 s). */
  bodyTimeoutMs?: number;
  /** Where successful key uses are noted (last use); none recorded without it. */
  keyUsage?: KeyUsageRecorder;
  /**
   * The application's own secure endpoints, served in this process after
   * authentication: canonical paths with a `secure` segment, by method. Each
   * handler receives the authenticated principal in its context.
   */
  secureRoutes?: Routes<SecureContext>;
  /** Where authenticated requests that keygate does not answer itself are forwarded. */
  upstream?: UpstreamOptions;
  /** Counters and histograms. Default: a private set nobody reads. */
  metrics?: Metrics;
  /**
   * The scheme of the listener: `https` (the default), since keygate serves
   * plain HTTP only in proxy mode, where the proxy's HTTPS is checked per request.
   */
  scheme?: "http" | "https";
  /** Accept non-ASCII letters in path segments (`--unicode-paths on`). Default `false`. */
  unicodePaths?: boolean;
  /**
   * Which header names a forward-auth request's original URI and method
   * (`--forward-auth-header`). Default `"either"`: exactly one of the two
   * families may be present.
   */
  forwardAuthHeader?: ForwardAuthHeader;
  /** The RFC 8414 metadata's `issuer` (`--issuer`). Default: the origin each request asked. */
  issuer?: string;
  /**
   * Entries in each cache of validated grants, key holders and token statuses
   * (`--grant-cache-size`). Default 100,000; 0 turns them off.
   */
  grantCacheSize?: number;
  /** Set in proxy mode: plain HTTP behind a TLS-terminating proxy. */
  proxy?: ProxyOptions;
  /** The developer portal (`--portal on`), served under `/portal/` and `/api/portal/v1/`. */
  portal?: Omit<PortalDeps, "store" | "clock" | "hasher">;
  /**
   * This thread's limiter (rates and quotas); the listener starts and stops it. Default: one
   * of the handler's own, without the idle return.
   */
  limiter?: Limiter;
  /** Send `RateLimit-Policy` and `RateLimit` on limited keys' answers (`--limit-headers`). Default `true`. */
  limitHeaders?: boolean;
}

/**
 * The header a forward-auth request's original URI comes from:
 * `x-original-uri` (nginx `auth_request`, which sets it), `x-forwarded-uri`
 * (Caddy `forward_auth`, Traefik `ForwardAuth`), or `either`: whichever one is
 * present, refused when both are (a client may add the one its proxy does not set).
 */
export type ForwardAuthHeader = "x-original-uri" | "x-forwarded-uri" | "either";

/** Proxy mode: who may connect, and whose `X-Forwarded-*` headers are believed. */
export interface ProxyOptions {
  /** CIDR ranges of the proxies. */
  trustedProxies: readonly string[];
}
