/**
 * The validated server configuration `readConfig` returns, one property per
 * row of the settings table (./settings.ts).
 *
 * @module
 */
import type { LogLevel } from "../platform/logger.ts";
import type { ForwardAuthHeader } from "./parsers.ts";
import type { PortalConfig } from "./portal_settings.ts";

/** The validated server configuration. */
export interface Config extends PortalConfig {
  hostname: string;
  port: number;
  dbPath: string;
  /**
   * The store instead of `--db`: a `postgres://` URL (docs/postgres.md),
   * `sqlite:PATH` or a path. May hold a password: log only its redacted form.
   */
  store?: string;
  /** PostgreSQL: how long an unconfirmed grant epoch may serve secure requests from memory. */
  storeStalenessSeconds: number;
  /**
   * PostgreSQL: LISTEN for revocations (on), or learn of them only by polling the grant epoch
   * every 500 ms (off: where LISTEN cannot be used, e.g. behind a proxy that does not pass it).
   */
  storeListen: boolean;
  /** Entries in each in-memory cache of validated grants; 0 turns the caches off. */
  grantCacheSize: number;
  /** PEM files; both set or both undefined (then a self-signed pair is used). */
  certFile?: string;
  keyFile?: string;
  /** How often --cert and --key are checked for a new pair, in seconds; 0: only on SIGHUP. */
  certReloadIntervalSeconds: number;
  /**
   * Where the self-signed pair is kept when there is no `--cert`/`--key`. Default: beside the
   * SQLite database; on PostgreSQL (or `:memory:`) none: a new pair in memory at each start.
   */
  selfSignedDir?: string;
  defaultTimeoutSeconds: number;
  /** `["*"]` or a list of exact origins such as `https://example.org`. */
  corsOrigins: string[];
  logLevel: LogLevel;
  /** Backend that authenticated requests keygate does not answer itself are forwarded to. */
  upstream?: string;
  upstreamTimeoutSeconds: number;
  /** Remove the caller's API key and token before forwarding. */
  hideCredentials: boolean;
  /** Send `RateLimit-Policy` and `RateLimit` headers on answers to limited keys. */
  limitHeaders: boolean;
  /** Lease a limit's next window's units before it starts (off during an upgrade from 0.17). */
  limitLeaseAhead: boolean;
  /** Serve Prometheus metrics on a separate listener. */
  metrics: boolean;
  metricsHostname: string;
  metricsPort: number;
  /** Serve the admin API and web console on a separate HTTPS listener. */
  admin: boolean;
  adminHostname: string;
  adminPort: number;
  /** Plain HTTP behind a TLS-terminating proxy, on a loopback or private address only. */
  behindProxy: boolean;
  /** CIDR ranges whose `X-Forwarded-*` headers are believed (proxy mode only). */
  trustedProxies: string[];
  /** Which header names forward-auth's original request (see `ForwardAuthHeader`). */
  forwardAuthHeader: ForwardAuthHeader;
  /**
   * The `issuer` of the RFC 8414 metadata (an https origin). Unset: the origin each request
   * asked, from its `Host`.
   */
  issuer?: string;
  /** Accept non-ASCII letters in path segments (docs/security.md, "Canonical paths"). */
  unicodePaths: boolean;
  /** How long expired and revoked token rows are kept before the janitor deletes them. */
  tokenRetentionSeconds: number;
  /** How long audit log rows are kept before the janitor deletes them; 0: forever. */
  auditRetentionSeconds: number;
  /** How long in-flight requests may take to finish after SIGTERM. */
  shutdownTimeoutSeconds: number;
  /** A file that holds the process id while the server runs. */
  pidFile?: string;
  /**
   * The longest expected wait for a password check before a login gets 503 `service_busy`
   * (src/passwords/passwords.ts), in seconds.
   */
  loginQueueWaitSeconds: number;
  /** Request-serving threads sharing the port (`--workers`; 1: serve on the main thread). */
  workers: number;
}
