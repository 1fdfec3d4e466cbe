/**
 * Server configuration: command-line flags over `KEYGATE_*` environment
 * variables over defaults, validated once at start-up.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { parseDuration } from "./platform/duration.ts";
import { isCidr, isLoopbackOrPrivate } from "./platform/ip.ts";
import type { LogLevel } from "./platform/logger.ts";
import type { ForwardAuthHeader } from "./http/context.ts";

/** The validated server configuration. */
export interface Config {
  hostname: string;
  port: number;
  dbPath: string;
  /** PEM files; both set or both undefined (then a self-signed pair is used). */
  certFile?: string;
  keyFile?: string;
  defaultTimeoutSeconds: number;
  /** `["*"]` or a list of exact origins such as `https://example.org`. */
  corsOrigins: string[];
  logLevel: LogLevel;
  /** Backend that authenticated requests keygate does not answer itself are forwarded to. */
  upstream?: string;
  upstreamTimeoutSeconds: number;
  /** Remove the caller's API key and token before forwarding. */
  hideCredentials: boolean;
  /** Serve Prometheus metrics on a separate listener. */
  metrics: boolean;
  metricsHostname: string;
  metricsPort: number;
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
  /** How long in-flight requests may take to finish after SIGTERM. */
  shutdownTimeoutSeconds: number;
  /** Request-serving threads sharing the port (`--workers`; 1: serve on the main thread). */
  workers: number;
}

/** Thrown for a flag or variable that cannot be used; main prints its message and exits 2. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

interface Setting {
  flag: string;
  env: string;
  default?: string;
  help: string;
}

/** Every server setting: the flag, its environment variable, default and meaning. */
export const SETTINGS: readonly Setting[] = [
  { flag: "port", env: "KEYGATE_PORT", default: "8443", help: "HTTPS port to listen on" },
  {
    flag: "hostname",
    env: "KEYGATE_HOSTNAME",
    default: "0.0.0.0",
    help: "Address to listen on",
  },
  {
    flag: "db",
    env: "KEYGATE_DB",
    default: "db/keygate.sqlite3",
    help: "SQLite database file (created if missing)",
  },
  {
    flag: "cert",
    env: "KEYGATE_TLS_CERT",
    help: "TLS certificate chain, PEM (with --key; default: self-signed, kept beside the database)",
  },
  { flag: "key", env: "KEYGATE_TLS_KEY", help: "TLS private key, PEM (with --cert)" },
  {
    flag: "default-timeout",
    env: "KEYGATE_DEFAULT_TIMEOUT",
    default: "10h",
    help: "Token lifetime for users without their own timeout (90s, 15m, 10h, 7d)",
  },
  {
    flag: "cors-origins",
    env: "KEYGATE_CORS_ORIGINS",
    default: "*",
    help: 'Comma-separated origins allowed by CORS, or "*"',
  },
  {
    flag: "log-level",
    env: "KEYGATE_LOG_LEVEL",
    default: "info",
    help: "debug, info, warn, error or off",
  },
  {
    flag: "upstream",
    env: "KEYGATE_UPSTREAM",
    help: "Forward authenticated requests for other paths to this http(s) URL (default: none, 404)",
  },
  {
    flag: "upstream-timeout",
    env: "KEYGATE_UPSTREAM_TIMEOUT",
    default: "30s",
    help: "How long the upstream may take to start its response before 504",
  },
  {
    flag: "hide-credentials",
    env: "KEYGATE_HIDE_CREDENTIALS",
    default: "true",
    help: "true: strip API key and token from forwarded requests; false: pass them on",
  },
  {
    flag: "metrics",
    env: "KEYGATE_METRICS",
    default: "off",
    help: "on: serve Prometheus metrics at /metrics on a separate listener; off: no metrics",
  },
  {
    flag: "metrics-hostname",
    env: "KEYGATE_METRICS_HOSTNAME",
    default: "127.0.0.1",
    help: "Address of the metrics listener",
  },
  {
    flag: "metrics-port",
    env: "KEYGATE_METRICS_PORT",
    default: "9464",
    help: "Port of the metrics listener (plain HTTP; never the public port)",
  },
  {
    flag: "behind-proxy",
    env: "KEYGATE_BEHIND_PROXY",
    default: "off",
    help: "on: plain HTTP on a loopback or private address behind a TLS proxy " +
      "(default hostname then 127.0.0.1)",
  },
  {
    flag: "trusted-proxies",
    env: "KEYGATE_TRUSTED_PROXIES",
    default: "127.0.0.1/32,::1/128",
    help: "Comma-separated CIDR ranges of the proxies allowed to connect in proxy mode",
  },
  {
    flag: "forward-auth-header",
    env: "KEYGATE_FORWARD_AUTH_HEADER",
    default: "either",
    help: "Header naming forward-auth's original request: x-original-uri (nginx), " +
      "x-forwarded-uri (Caddy, Traefik), or either (refused when both are sent)",
  },
  {
    flag: "unicode-paths",
    env: "KEYGATE_UNICODE_PATHS",
    default: "off",
    help: "on: accept non-ASCII letters in path segments; off: refuse them with 400",
  },
  {
    flag: "token-retention",
    env: "KEYGATE_TOKEN_RETENTION",
    default: "7d",
    help: "How long expired and revoked token rows are kept before deletion",
  },
  {
    flag: "shutdown-timeout",
    env: "KEYGATE_SHUTDOWN_TIMEOUT",
    default: "30s",
    help: "How long in-flight requests may take to finish after SIGTERM",
  },
  {
    flag: "workers",
    env: "KEYGATE_WORKERS",
    default: "1",
    help: 'Request-serving threads on the one port, or "auto" (one per CPU core)',
  },
];

const PLACEHOLDERS: Readonly<Record<string, string>> = {
  port: "N",
  "metrics-port": "N",
  metrics: "on|off",
  "behind-proxy": "on|off",
  "unicode-paths": "on|off",
  "forward-auth-header": "H",
  "trusted-proxies": "LIST",
  "cors-origins": "LIST",
  "default-timeout": "D",
  "token-retention": "D",
  "shutdown-timeout": "D",
  workers: "N|auto",
  db: "PATH",
  cert: "FILE",
  key: "FILE",
  hostname: "H",
  "metrics-hostname": "H",
  "log-level": "L",
};

/** The text `--help` prints. */
export function formatHelp(): string {
  const rows = SETTINGS.map((s) => {
    const flag = `  --${s.flag} ${PLACEHOLDERS[s.flag] ?? "VALUE"}`.padEnd(28);
    const fallback = s.default === undefined ? "" : ` (default: ${s.default})`;
    return `${flag}${s.help}${fallback}\n${"".padEnd(28)}env: ${s.env}`;
  });
  return [
    "keygate: API-key and access-token authentication over HTTPS",
    "",
    "Usage: deno task start [OPTIONS]",
    "",
    "Options (flags override environment variables):",
    ...rows,
    "  --help".padEnd(28) + "Print this help and exit",
    "",
  ].join("\n");
}

function isForwardAuthHeader(value: string): value is ForwardAuthHeader {
  return value === "x-original-uri" || value === "x-forwarded-uri" || value === "either";
}

const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error", "off"];

/**
 * Reads the configuration from command-line arguments and environment variables.
 *
 * Returns `undefined` when `--help` was given.
 *
 * @throws {ConfigError} for an unknown flag or an invalid value.
 */
export function readConfig(
  args: string[],
  env: Readonly<Record<string, string | undefined>>,
): Config | undefined {
  let values: Record<string, string | boolean | undefined>;
  try {
    const options = Object.fromEntries(
      SETTINGS.map((s) => [s.flag, { type: "string" as const }]),
    );
    values = parseArgs({
      args,
      options: { ...options, help: { type: "boolean" } },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  if (values.help) return undefined;

  const get = (flag: string): string | undefined => {
    const setting = SETTINGS.find((s) => s.flag === flag)!;
    const value = values[flag] ?? env[setting.env] ?? setting.default;
    return typeof value === "string" && value !== "" ? value : undefined;
  };

  const port = Number(get("port"));
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`Invalid port "${get("port")}": expected a whole number from 0 to 65535`);
  }
  const certFile = get("cert");
  const keyFile = get("key");
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError("Invalid TLS settings: --cert and --key go together");
  }
  let defaultTimeoutSeconds: number;
  try {
    defaultTimeoutSeconds = parseDuration(get("default-timeout")!);
  } catch (error) {
    throw new ConfigError(`Invalid --default-timeout: ${(error as Error).message}`);
  }
  const corsOrigins = get("cors-origins")!.split(",").map((o) => o.trim()).filter(Boolean);
  for (const origin of corsOrigins) {
    if (origin !== "*" && !/^https?:\/\/[^/\s]+$/.test(origin)) {
      throw new ConfigError(
        `Invalid --cors-origins entry "${origin}": expected "*" or an origin like "https://example.org"`,
      );
    }
  }
  const logLevel = get("log-level") as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`Invalid --log-level "${logLevel}": expected ${LOG_LEVELS.join(", ")}`);
  }
  const upstream = get("upstream");
  if (upstream !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(upstream);
    } catch {
      url = undefined;
    }
    if (
      url === undefined || (url.protocol !== "http:" && url.protocol !== "https:") ||
      url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== ""
    ) {
      throw new ConfigError(
        `Invalid --upstream "${upstream}": expected an http or https URL without query or credentials`,
      );
    }
  }
  let upstreamTimeoutSeconds: number;
  try {
    upstreamTimeoutSeconds = parseDuration(get("upstream-timeout")!);
  } catch (error) {
    throw new ConfigError(`Invalid --upstream-timeout: ${(error as Error).message}`);
  }
  const hide = get("hide-credentials")!;
  if (hide !== "true" && hide !== "false") {
    throw new ConfigError(`Invalid --hide-credentials "${hide}": expected true or false`);
  }
  const toSwitch = (flag: string): boolean => {
    const value = get(flag)!.toLowerCase();
    if (value === "on" || value === "true") return true;
    if (value === "off" || value === "false") return false;
    throw new ConfigError(`Invalid --${flag} "${get(flag)}": expected on or off`);
  };
  const toSeconds = (flag: string): number => {
    try {
      return parseDuration(get(flag)!);
    } catch (error) {
      throw new ConfigError(`Invalid --${flag}: ${(error as Error).message}`);
    }
  };
  const metrics = toSwitch("metrics");
  const metricsPort = Number(get("metrics-port"));
  if (!Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65535) {
    throw new ConfigError(
      `Invalid --metrics-port "${get("metrics-port")}": expected a whole number from 0 to 65535`,
    );
  }
  if (metrics && metricsPort !== 0 && metricsPort === port) {
    throw new ConfigError("Invalid --metrics-port: metrics are never served on the public port");
  }
  const behindProxy = toSwitch("behind-proxy");
  const hostnameGiven = values.hostname !== undefined || (env.KEYGATE_HOSTNAME ?? "") !== "";
  const hostname = behindProxy && !hostnameGiven ? "127.0.0.1" : get("hostname")!;
  const trustedProxies = (get("trusted-proxies") ?? "").split(",").map((r) => r.trim())
    .filter(Boolean);
  for (const range of trustedProxies) {
    if (!isCidr(range)) {
      throw new ConfigError(
        `Invalid --trusted-proxies entry "${range}": expected a CIDR range like "10.0.0.0/8"`,
      );
    }
  }
  if (behindProxy) {
    if (!isLoopbackOrPrivate(hostname)) {
      throw new ConfigError(
        `Invalid --hostname "${hostname}" with --behind-proxy: ` +
          "plain HTTP is served only on a loopback or private address",
      );
    }
    if (certFile !== undefined) {
      throw new ConfigError(
        "Invalid TLS settings: --cert and --key do not apply with --behind-proxy",
      );
    }
    if (trustedProxies.length === 0) {
      throw new ConfigError("Invalid --trusted-proxies: --behind-proxy needs at least one range");
    }
  }
  const forwardAuthHeader = get("forward-auth-header")!.toLowerCase();
  if (!isForwardAuthHeader(forwardAuthHeader)) {
    throw new ConfigError(
      `Invalid --forward-auth-header "${
        get("forward-auth-header")
      }": expected x-original-uri, x-forwarded-uri or either`,
    );
  }
  return {
    hostname,
    port,
    dbPath: get("db")!,
    certFile,
    keyFile,
    defaultTimeoutSeconds,
    corsOrigins,
    logLevel,
    upstream,
    upstreamTimeoutSeconds,
    hideCredentials: hide === "true",
    metrics,
    metricsHostname: get("metrics-hostname")!,
    metricsPort,
    behindProxy,
    trustedProxies,
    forwardAuthHeader,
    unicodePaths: toSwitch("unicode-paths"),
    tokenRetentionSeconds: toSeconds("token-retention"),
    shutdownTimeoutSeconds: toSeconds("shutdown-timeout"),
    workers: parseWorkers(get("workers") ?? ""),
  };
}

/** Most request workers: beyond this, more threads only cost memory. */
export const MAX_WORKERS = 64;

/** `--workers`: a whole number from 1 to {@link MAX_WORKERS}, or `auto` (the CPU count). */
export function parseWorkers(text: string): number {
  if (text.trim().toLowerCase() === "auto") {
    return Math.min(MAX_WORKERS, Math.max(1, navigator.hardwareConcurrency));
  }
  const n = /^\d{1,3}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!(n >= 1 && n <= MAX_WORKERS)) {
    throw new ConfigError(
      `Invalid --workers "${text}": expected a whole number from 1 to ${MAX_WORKERS}, or "auto"`,
    );
  }
  return n;
}
