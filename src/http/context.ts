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
import type { Format } from "./respond.ts";
import type { Routes } from "./route.ts";
import type { SecureContext } from "./routes/secure.ts";
import type { Store } from "../store/store.ts";
import type { ThrottleRules } from "../auth/throttle.ts";
import type { UpstreamOptions } from "./upstream.ts";

/** Per-request facts, filled in as the request is handled. */
export interface RequestContext {
  requestId: string;
  url: URL;
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
  /** Id of the API key the request was authenticated with, once known (logged; never the key). */
  apiKeyId?: number;
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
  /** Set in proxy mode: plain HTTP behind a TLS-terminating proxy. */
  proxy?: ProxyOptions;
}

/** Proxy mode: who may connect, and whose `X-Forwarded-*` headers are believed. */
export interface ProxyOptions {
  /** CIDR ranges of the proxies. */
  trustedProxies: readonly string[];
}
