/**
 * One request-serving listener: the handler over a store, and `Deno.serve`
 * on the configured address. The single-threaded server runs one in the main
 * thread; with `--workers N` each request worker runs one, all on one port
 * (`reusePort`: the kernel spreads connections among them). Over TLS it binds
 * with `reusePort` even alone, where Deno allows it, so that a certificate
 * reload can bind the new listener beside it (src/server/swappable_server.ts).
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import { createKeyUsageRecorder, type KeyUsageRecorder } from "../auth/key_usage.ts";
import { createHandler } from "../http/app.ts";
import type { SecureContext } from "../http/context.ts";
import type { Routes } from "../http/route.ts";
import type { PasswordHasher } from "../passwords/passwords.ts";
import { systemClock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { setListenerNoDelay } from "../platform/nodelay.ts";
import type { Store } from "../store/store.ts";
import { canBindBeside, startSwappableServer, type SwappableServer } from "./swappable_server.ts";

/** What {@link startListener} serves with. */
export interface ListenerDeps {
  config: Config;
  /** PEM certificate and key; undefined behind a proxy (plain HTTP). */
  tls?: { cert: string; key: string };
  store: Store;
  hasher: PasswordHasher;
  logger: Logger;
  metrics: Metrics;
  secureRoutes?: Routes<SecureContext>;
  /** The port to bind (with --workers, the one the first worker got). Default: config.port. */
  port?: number;
  /** Share the port with the other workers (default: over TLS, where Deno allows it). */
  reusePort?: boolean;
  /** Log the listening line (default; request workers leave it to the main thread). */
  announce?: boolean;
  /** The store as the listening line shows it (a PostgreSQL URL without its password). */
  storeDisplay?: string;
}

/** The port a listener got, and whether Nagle's algorithm could be turned off on it. */
export interface Bound {
  port: number;
  noDelay: boolean;
}

/** Logs the line that says the server is ready (tests and operators wait for it). */
export function logListening(
  logger: Logger,
  config: Config,
  bound: Bound,
  storeDisplay = config.dbPath,
): void {
  const { hostname } = config;
  const host = hostname === "0.0.0.0" || hostname === "::" ? "localhost" : hostname;
  const scheme = config.behindProxy ? "http" : "https";
  logger.info(`keygate listening on ${scheme}://${host}:${bound.port}/`, {
    hostname,
    port: bound.port,
    db: storeDisplay,
    behind_proxy: config.behindProxy,
    tcp_nodelay: bound.noDelay,
    ...(config.workers > 1 ? { workers: config.workers } : {}),
  });
  if (!bound.noDelay && !config.behindProxy) {
    logger.warn(
      "could not turn off Nagle's algorithm (needs Linux and --allow-ffi): responses of about 500-700 bytes may wait 40 ms; see docs/performance.md",
    );
  }
}

/** A started listener. */
export interface Listener {
  /** Shut down and awaited as a `Deno.HttpServer`; its certificate can change (a reload). */
  server: SwappableServer;
  keyUsage: KeyUsageRecorder;
  /** Resolves once listening. */
  listening: Promise<Bound>;
}

/** Builds the handler and starts serving; key usage is recorded and flushed periodically. */
export function startListener(deps: ListenerDeps): Listener {
  const { config, tls, logger } = deps;
  const keyUsage = createKeyUsageRecorder({ store: deps.store, clock: systemClock, logger });
  const handler = createHandler({
    store: deps.store,
    hasher: deps.hasher,
    clock: systemClock,
    logger,
    defaultTimeoutSeconds: config.defaultTimeoutSeconds,
    corsOrigins: config.corsOrigins,
    keyUsage,
    secureRoutes: deps.secureRoutes,
    upstream: config.upstream === undefined ? undefined : {
      url: new URL(config.upstream),
      timeoutMs: config.upstreamTimeoutSeconds * 1000,
      hideCredentials: config.hideCredentials,
    },
    metrics: deps.metrics,
    proxy: config.behindProxy ? { trustedProxies: config.trustedProxies } : undefined,
    scheme: tls === undefined ? "http" : "https",
    unicodePaths: config.unicodePaths,
    forwardAuthHeader: config.forwardAuthHeader,
    grantCacheSize: config.grantCacheSize,
  });
  let bound!: (address: Bound) => void;
  const listening = new Promise<Bound>((resolve) => bound = resolve);
  const server = startSwappableServer({
    hostname: config.hostname,
    port: deps.port ?? config.port,
    reusePort: deps.reusePort ?? (tls !== undefined && canBindBeside()),
    checkAddressFree: deps.reusePort === undefined,
    tls,
    onListen({ port }, first) {
      // Deno's TLS listener leaves Nagle's algorithm on: see src/platform/nodelay.ts.
      const noDelay = setListenerNoDelay(port) > 0;
      if (!first) return;
      bound({ port, noDelay });
      if (deps.announce !== false) {
        logListening(logger, config, { port, noDelay }, deps.storeDisplay);
      }
    },
  }, handler);
  keyUsage.start();
  return { server, keyUsage, listening };
}
