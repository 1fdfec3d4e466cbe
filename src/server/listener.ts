/**
 * The API's request-serving listener on one thread: the key-usage recorder,
 * the handler composed by src/server/compose.ts, and `Deno.serve` on the
 * configured address. The single-threaded server runs one in the main
 * thread; with `--workers N` each request worker runs one, all on one port
 * (`reusePort`: the kernel spreads connections among them). Over TLS it binds
 * with `reusePort` even alone, where Deno allows it, so that a certificate
 * reload can bind the new listener beside it (src/server/swappable_server.ts).
 *
 * Disposing it stops accepting, lets the requests in flight finish within
 * `--shutdown-timeout`, then writes the last key uses and gives the unspent limit units back.
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import { createKeyUsageRecorder } from "../auth/key_usage.ts";
import { createLimiter } from "../auth/limiter.ts";
import { createHandler } from "../http/app.ts";
import { systemClock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { setListenerNoDelay } from "../platform/nodelay.ts";
import { type ApiServices, composeHandlerDeps } from "./compose.ts";
import { canBindBeside, startSwappableServer, type SwappableServer } from "./swappable_server.ts";

/** Where and how {@link startApiListener} listens. */
export interface ListenOptions {
  /** PEM certificate and key; undefined behind a proxy (plain HTTP). */
  tls?: { cert: string; key: string };
  /** The port to bind (with --workers, the one the first worker got). Default: config.port. */
  port?: number;
  /** Share the port with the other workers (default: over TLS, where Deno allows it). */
  reusePort?: boolean;
  /**
   * Log the listening line and a passed shutdown deadline (default; request workers leave both
   * to the main thread).
   */
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
    ...(config.limitLeaseAhead ? {} : { limit_lease_ahead: false }),
  });
  if (!bound.noDelay && !config.behindProxy) {
    logger.warn(
      "could not turn off Nagle's algorithm (needs Linux and --allow-ffi): responses of about 500-700 bytes may wait 40 ms; see docs/performance.md",
    );
  }
}

/** A started API listener; disposing it drains it within `--shutdown-timeout`. */
export interface ApiListener extends AsyncDisposable {
  /** Shut down and awaited as a `Deno.HttpServer`; its certificate can change (a reload). */
  server: SwappableServer;
  /** Resolves once listening. */
  listening: Promise<Bound>;
  /**
   * Stops accepting and waits for the requests in flight at most `deadlineMs`, then writes the
   * last key uses; resolves to whether they all finished. Later calls share the first one's.
   */
  drain(deadlineMs: number): Promise<boolean>;
}

/**
 * Starts the API on this thread: key usage recorded (and flushed periodically), the handler
 * composed from `config` and `services`, and its listener (throws as `Deno.serve` does when it
 * cannot bind, with nothing left running).
 */
export function startApiListener(
  config: Config,
  services: Omit<ApiServices, "keyUsage" | "limiter">,
  options: ListenOptions = {},
): ApiListener {
  const { logger } = services;
  const { tls } = options;
  const keyUsage = createKeyUsageRecorder({ store: services.store, clock: systemClock, logger });
  const limiter = createLimiter({
    store: services.store,
    clock: systemClock,
    logger,
    metrics: services.metrics,
    leaseAhead: config.limitLeaseAhead,
  });
  const handler = createHandler(composeHandlerDeps(config, { ...services, keyUsage, limiter }));
  let bound!: (address: Bound) => void;
  const listening = new Promise<Bound>((resolve) => bound = resolve);
  const server = startSwappableServer({
    hostname: config.hostname,
    port: options.port ?? config.port,
    reusePort: options.reusePort ?? (tls !== undefined && canBindBeside()),
    checkAddressFree: options.reusePort === undefined,
    tls,
    onListen({ port }, first) {
      // Deno's TLS listener leaves Nagle's algorithm on: see src/platform/nodelay.ts.
      const noDelay = setListenerNoDelay(port) > 0;
      if (!first) return;
      bound({ port, noDelay });
      if (options.announce !== false) {
        logListening(logger, config, { port, noDelay }, options.storeDisplay);
      }
    },
  }, handler);
  keyUsage.start();
  limiter.start();
  let drained: Promise<boolean> | undefined;
  const drain = (deadlineMs: number) =>
    drained ??= (async () => {
      const finished = await stopWithin(server, deadlineMs);
      await keyUsage.stop(); // writes the last uses before the store closes
      await limiter.stop(); // gives the units in hand back, so a clean stop loses none
      return finished;
    })();
  return {
    server,
    listening,
    drain,
    async [Symbol.asyncDispose]() {
      const finished = await drain(config.shutdownTimeoutSeconds * 1000);
      if (!finished && options.announce !== false) warnDeadlinePassed(logger);
    },
  };
}

/** The line an operator sees when in-flight requests outlived `--shutdown-timeout`. */
export function warnDeadlinePassed(logger: Logger): void {
  logger.warn("shutdown deadline passed: closing with requests still in flight");
}

/** Stops accepting and waits for in-flight requests at most `deadlineMs`; false if they did not end. */
async function stopWithin(server: SwappableServer, deadlineMs: number): Promise<boolean> {
  void server.shutdown();
  let deadline: ReturnType<typeof setTimeout> | undefined;
  const finished = await Promise.race([
    server.finished.then(() => true),
    new Promise<false>((resolve) => deadline = setTimeout(() => resolve(false), deadlineMs)),
  ]);
  clearTimeout(deadline);
  return finished;
}
