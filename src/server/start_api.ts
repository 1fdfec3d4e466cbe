/**
 * The API as the main thread starts it: one listener on this thread
 * (src/server/listener.ts), or with `--workers N` a claimed port
 * (src/server/port_guard.ts) and N request workers on it
 * (src/server/worker_pool.ts). Either way one `AsyncDisposable` that drains
 * within `--shutdown-timeout`, and a failure to start is one line naming the
 * flag, with everything it had started closed.
 *
 * @module
 */
import { StartupError } from "../config/errors.ts";
import { explainListenError } from "../config/preflight.ts";
import type { Config } from "../config/settings.ts";
import type { MetricsSnapshot } from "../platform/metrics.ts";
import type { ReloadTarget } from "./cert_reload.ts";
import { toReloadTarget } from "./cert_reload.ts";
import type { ApiServices } from "./compose.ts";
import { logListening, startApiListener, warnDeadlinePassed } from "./listener.ts";
import type { SharedGrantCounter } from "./open_server_store.ts";
import { claimPort } from "./port_guard.ts";
import { createWorkerPool } from "./worker_pool.ts";
import { WorkerStartError } from "./worker_spawn.ts";

/** What the API's start needs besides the configuration. */
export interface ApiStart {
  services: Omit<ApiServices, "keyUsage" | "limiter">;
  /** PEM certificate and key; undefined behind a proxy (plain HTTP). */
  tls?: { cert: string; key: string };
  /** The store as the listening line shows it. */
  storeDisplay: string;
  /** The grant counter every worker's store shares with the main thread's (PostgreSQL). */
  sharedGrantCounter?: SharedGrantCounter;
  /** Hears a request worker's store condition that needs a restart (src/server/fatal_stop.ts). */
  onFatal?(reason: string): void;
}

/** The serving API; disposing it stops accepting and drains within `--shutdown-timeout`. */
export interface ServedApi extends AsyncDisposable {
  /** Settles if the listener stops by itself (never with workers, which restart). */
  finished: Promise<void>;
  /** Where a certificate reload swaps the API's listeners; undefined over plain HTTP. */
  reloadTarget?: ReloadTarget;
  /** The request workers' metrics (none without workers). */
  gatherMetrics(): Promise<MetricsSnapshot[]>;
  /** Gives the CPU to the password pool for `ms` (the workers sleep; nothing without them). */
  yieldCpu(ms: number): void;
}

const WHERE = { hostnameFlag: "--hostname", portFlag: "--port" };

/** Starts the API: on this thread, or in `config.workers` request workers. */
export async function startApi(config: Config, start: ApiStart): Promise<ServedApi> {
  const where = { ...WHERE, hostname: config.hostname, port: config.port };
  if (config.workers > 1) return await startWorkers(config, start);
  let api;
  try {
    api = startApiListener(config, start.services, {
      tls: start.tls,
      storeDisplay: start.storeDisplay,
    });
  } catch (error) {
    throw explainListenError(error, where, config);
  }
  await api.listening;
  return {
    finished: api.server.finished,
    reloadTarget: start.tls === undefined ? undefined : toReloadTarget("api", api.server),
    gatherMetrics: () => Promise.resolve([]),
    yieldCpu: () => {},
    [Symbol.asyncDispose]: () => api[Symbol.asyncDispose](),
  };
}

async function startWorkers(config: Config, start: ApiStart): Promise<ServedApi> {
  const { logger } = start.services;
  const where = { ...WHERE, hostname: config.hostname, port: config.port };
  await using parts = new AsyncDisposableStack();
  const pool = (() => {
    try {
      // The workers share the port through SO_REUSEPORT, which another process could join:
      // first make sure that no other process serves or is claiming this address.
      const claim = parts.use(claimPort(config.hostname, config.port));
      return createWorkerPool({
        config,
        port: claim.port,
        tls: start.tls,
        hasher: start.services.hasher,
        logger,
        sharedGrantCounter: start.sharedGrantCounter,
        onFatal: start.onFatal,
      });
    } catch (error) {
      throw explainListenError(error, where, config);
    }
  })();
  let bound;
  try {
    bound = await pool.start();
  } catch (error) {
    throw explainWorkerError(error, config);
  }
  const { port } = bound;
  logListening(logger, config, bound, start.storeDisplay);
  parts.defer(async () => {
    if (!await pool.drain(config.shutdownTimeoutSeconds * 1000)) warnDeadlinePassed(logger);
  });
  const owned = parts.move();
  return {
    finished: new Promise<void>(() => {}),
    reloadTarget: start.tls === undefined ? undefined : {
      name: "api",
      port: () => port,
      bind: pool.bindTls,
      retire: pool.retireTls,
    },
    gatherMetrics: () => pool.gatherMetrics(),
    yieldCpu: (ms) => pool.yieldCpu(ms),
    [Symbol.asyncDispose]: () => owned.disposeAsync(),
  };
}

function explainWorkerError(error: unknown, config: Config): StartupError {
  if (error instanceof WorkerStartError && error.stage === "store") {
    return new StartupError(
      `could not start ${config.workers} request workers: ${error.message}`,
      1,
    );
  }
  // The same one line as without --workers: the port in use, say.
  return explainListenError(
    error instanceof WorkerStartError ? error.toOriginal() : error,
    { ...WHERE, hostname: config.hostname, port: config.port },
    config,
  );
}
