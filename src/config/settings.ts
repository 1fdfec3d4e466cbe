/**
 * The one table of server settings. Each row names the flag, its
 * environment variable, the default (as text, parsed like any other source),
 * the parser that turns text into the typed value, the placeholder `--help`
 * shows and what the setting means. `readConfig` and `--help` are generated
 * from it; a new setting (such as `--store URL` / `KEYGATE_STORE`) is one new row.
 *
 * @module
 */
import type { LogLevel } from "../platform/logger.ts";
import {
  type ForwardAuthHeader,
  parseAuditRetention,
  parseBoolean,
  parseCacheSize,
  parseCidrList,
  parseDatabasePath,
  parseDurationSetting,
  parseForwardAuthHeader,
  parseLoginQueueWait,
  parseLogLevel,
  parseOptionalInterval,
  parseOrigins,
  parsePort,
  parseStalenessSetting,
  parseStoreSetting,
  parseText,
  parseUpstreamUrl,
  parseWorkers,
} from "./parsers.ts";

/** The validated server configuration. */
export interface Config {
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
   * every 500 ms (off: for engines without LISTEN/NOTIFY, such as CockroachDB).
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

/** One setting: where it comes from, how it is parsed and how `--help` shows it. */
export interface Setting<K extends keyof Config = keyof Config> {
  /** The property of {@link Config} it fills. */
  key: K;
  /** The long flag, without `--`. */
  flag: string;
  /** The environment variable. */
  env: string;
  /** The default as text; absent for an optional setting. */
  default?: string;
  /** Text → value; throws `SyntaxError` saying what was expected. */
  parse(text: string): NonNullable<Config[K]>;
  /** The typed placeholder in `--help`: `N`, `PATH`, `DURATION`, `on|off`. */
  placeholder: string;
  description: string;
}

function setting<K extends keyof Config>(row: Setting<K>): Setting {
  return row as unknown as Setting;
}

/** Whether a setting is a boolean: a bare flag means on. */
export function isBooleanSetting(row: Setting): boolean {
  return row.parse === parseBoolean;
}

/** Every server setting, in `--help` order. */
export const SETTINGS: readonly Setting[] = [
  setting({
    key: "port",
    flag: "port",
    env: "KEYGATE_PORT",
    default: "8443",
    parse: parsePort,
    placeholder: "N",
    description: "HTTPS port to listen on; 0 picks a free port",
  }),
  setting({
    key: "hostname",
    flag: "hostname",
    env: "KEYGATE_HOSTNAME",
    default: "0.0.0.0",
    parse: parseText,
    placeholder: "HOST",
    description: "Address to listen on (127.0.0.1 with --behind-proxy)",
  }),
  setting({
    key: "dbPath",
    flag: "db",
    env: "KEYGATE_DB",
    default: "db/keygate.sqlite3",
    parse: parseDatabasePath,
    placeholder: "PATH",
    description: "SQLite database file, created with its directory if missing",
  }),
  setting({
    key: "store",
    flag: "store",
    env: "KEYGATE_STORE",
    parse: parseStoreSetting,
    placeholder: "URL",
    description:
      "Store instead of --db: postgres://USER[:PASSWORD]@HOST[:PORT][,HOST2…]/DB[?sslmode=…] " +
      "(docs/postgres.md), sqlite:PATH or a path",
  }),
  setting({
    key: "storeStalenessSeconds",
    flag: "store-staleness",
    env: "KEYGATE_STORE_STALENESS",
    default: "2s",
    parse: parseStalenessSetting,
    placeholder: "DURATION",
    description: "PostgreSQL: secure requests get 503 once revocations are unconfirmed this " +
      "long (at most 5m)",
  }),
  setting({
    key: "storeListen",
    flag: "store-listen",
    env: "KEYGATE_STORE_LISTEN",
    default: "on",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "PostgreSQL: LISTEN for revocations (off: poll every 500 ms only, " +
      "for engines without LISTEN/NOTIFY such as CockroachDB)",
  }),
  setting({
    key: "grantCacheSize",
    flag: "grant-cache-size",
    env: "KEYGATE_GRANT_CACHE_SIZE",
    default: "100000",
    parse: parseCacheSize,
    placeholder: "N",
    description:
      "Validated grants kept in memory per cache; 0: none, every request reads the store",
  }),
  setting({
    key: "certFile",
    flag: "cert",
    env: "KEYGATE_TLS_CERT",
    parse: parseText,
    placeholder: "FILE",
    description: "TLS certificate chain, PEM, with --key (default: self-signed)",
  }),
  setting({
    key: "keyFile",
    flag: "key",
    env: "KEYGATE_TLS_KEY",
    parse: parseText,
    placeholder: "FILE",
    description: "TLS private key, PEM, with --cert",
  }),
  setting({
    key: "certReloadIntervalSeconds",
    flag: "cert-reload-interval",
    env: "KEYGATE_CERT_RELOAD_INTERVAL",
    default: "1m",
    parse: parseOptionalInterval,
    placeholder: "DURATION",
    description: "How often --cert and --key are checked for a renewed pair; 0: only on SIGHUP",
  }),
  setting({
    key: "selfSignedDir",
    flag: "self-signed-dir",
    env: "KEYGATE_SELF_SIGNED_DIR",
    parse: parseText,
    placeholder: "DIR",
    description: "Without --cert: keep the self-signed pair here (default: beside the SQLite " +
      "file; on PostgreSQL, a new one in memory at each start)",
  }),
  setting({
    key: "defaultTimeoutSeconds",
    flag: "default-timeout",
    env: "KEYGATE_DEFAULT_TIMEOUT",
    default: "10h",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "Token lifetime for users without their own timeout",
  }),
  setting({
    key: "corsOrigins",
    flag: "cors-origins",
    env: "KEYGATE_CORS_ORIGINS",
    default: "*",
    parse: parseOrigins,
    placeholder: "ORIGINS",
    description: 'Comma-separated origins allowed by CORS, or "*"',
  }),
  setting({
    key: "logLevel",
    flag: "log-level",
    env: "KEYGATE_LOG_LEVEL",
    default: "info",
    parse: parseLogLevel,
    placeholder: "LEVEL",
    description: "debug, info, warn, error or off",
  }),
  setting({
    key: "upstream",
    flag: "upstream",
    env: "KEYGATE_UPSTREAM",
    parse: parseUpstreamUrl,
    placeholder: "URL",
    description: "Forward authenticated requests for other paths here (default: 404)",
  }),
  setting({
    key: "upstreamTimeoutSeconds",
    flag: "upstream-timeout",
    env: "KEYGATE_UPSTREAM_TIMEOUT",
    default: "30s",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "How long the upstream may take to start its response before 504",
  }),
  setting({
    key: "hideCredentials",
    flag: "hide-credentials",
    env: "KEYGATE_HIDE_CREDENTIALS",
    default: "on",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Strip the API key and token from forwarded requests",
  }),
  setting({
    key: "limitHeaders",
    flag: "limit-headers",
    env: "KEYGATE_LIMIT_HEADERS",
    default: "on",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Send RateLimit-Policy and RateLimit headers on answers to keys with limits",
  }),
  setting({
    key: "metrics",
    flag: "metrics",
    env: "KEYGATE_METRICS",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Serve Prometheus metrics at /metrics on a separate listener",
  }),
  setting({
    key: "metricsHostname",
    flag: "metrics-hostname",
    env: "KEYGATE_METRICS_HOSTNAME",
    default: "127.0.0.1",
    parse: parseText,
    placeholder: "HOST",
    description: "Address of the metrics listener",
  }),
  setting({
    key: "metricsPort",
    flag: "metrics-port",
    env: "KEYGATE_METRICS_PORT",
    default: "9464",
    parse: parsePort,
    placeholder: "N",
    description: "Port of the metrics listener (plain HTTP; never the public port)",
  }),
  setting({
    key: "admin",
    flag: "admin",
    env: "KEYGATE_ADMIN",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description:
      "Serve the admin API (/admin/v1/) and web console over HTTPS on a separate listener",
  }),
  setting({
    key: "adminHostname",
    flag: "admin-hostname",
    env: "KEYGATE_ADMIN_HOSTNAME",
    default: "127.0.0.1",
    parse: parseText,
    placeholder: "HOST",
    description:
      "Address of the admin listener (reach it through an SSH tunnel or a private network)",
  }),
  setting({
    key: "adminPort",
    flag: "admin-port",
    env: "KEYGATE_ADMIN_PORT",
    default: "9444",
    parse: parsePort,
    placeholder: "N",
    description:
      "Port of the admin listener (HTTPS with keygate's certificate; never the public port)",
  }),
  setting({
    key: "behindProxy",
    flag: "behind-proxy",
    env: "KEYGATE_BEHIND_PROXY",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Plain HTTP on a loopback or private address, behind a TLS proxy",
  }),
  setting({
    key: "trustedProxies",
    flag: "trusted-proxies",
    env: "KEYGATE_TRUSTED_PROXIES",
    default: "127.0.0.1/32,::1/128",
    parse: parseCidrList,
    placeholder: "CIDRS",
    description: "Comma-separated ranges of the proxies allowed to connect in proxy mode",
  }),
  setting({
    key: "forwardAuthHeader",
    flag: "forward-auth-header",
    env: "KEYGATE_FORWARD_AUTH_HEADER",
    default: "either",
    parse: parseForwardAuthHeader,
    placeholder: "HEADER",
    description: "Header naming forward-auth's original request: x-original-uri (nginx), " +
      "x-forwarded-uri (Caddy, Traefik), or either (refused when both are sent)",
  }),
  setting({
    key: "unicodePaths",
    flag: "unicode-paths",
    env: "KEYGATE_UNICODE_PATHS",
    default: "off",
    parse: parseBoolean,
    placeholder: "[on|off]",
    description: "Accept non-ASCII letters in path segments (off: refuse them with 400)",
  }),
  setting({
    key: "tokenRetentionSeconds",
    flag: "token-retention",
    env: "KEYGATE_TOKEN_RETENTION",
    default: "7d",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "How long expired and revoked token rows are kept before deletion",
  }),
  setting({
    key: "auditRetentionSeconds",
    flag: "audit-retention",
    env: "KEYGATE_AUDIT_RETENTION",
    default: "off",
    parse: parseAuditRetention,
    placeholder: "DURATION",
    description: "How long audit log rows are kept: off (forever) or at least 30d",
  }),
  setting({
    key: "shutdownTimeoutSeconds",
    flag: "shutdown-timeout",
    env: "KEYGATE_SHUTDOWN_TIMEOUT",
    default: "30s",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "How long in-flight requests may take to finish after SIGTERM",
  }),
  setting({
    key: "loginQueueWaitSeconds",
    flag: "login-queue-wait",
    env: "KEYGATE_LOGIN_QUEUE_WAIT",
    default: "5s",
    parse: parseLoginQueueWait,
    placeholder: "DURATION",
    description: "Queue logins while their expected wait for a hash is within this",
  }),
  setting({
    key: "workers",
    flag: "workers",
    env: "KEYGATE_WORKERS",
    default: "1",
    parse: parseWorkers,
    placeholder: "N|auto",
    description: 'Request-serving threads sharing the port, or "auto" (one per CPU core)',
  }),
  setting({
    key: "pidFile",
    flag: "pid-file",
    env: "KEYGATE_PID_FILE",
    parse: parseText,
    placeholder: "PATH",
    description: "Write the process id to this file while serving, for kill $(cat PATH)",
  }),
];
