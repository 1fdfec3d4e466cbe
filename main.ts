/**
 * keygate's composition root: read the configuration, open the store, build
 * the handler, serve HTTPS (plain HTTP in proxy mode), start the metrics
 * listener, the token janitor and the periodic key-usage flush; on
 * SIGINT/SIGTERM stop accepting, finish in-flight requests within
 * --shutdown-timeout, stop the janitor and the metrics listener, flush key
 * usage, checkpoint and close the database.
 *
 * `keygate admin …` (or `deno task admin …`) runs the admin CLI instead, so
 * that a compiled binary carries both.
 *
 * @module
 */
import { main as adminMain } from "./src/cli/main.ts";
import type { Routes } from "./src/http/route.ts";
import type { SecureContext } from "./src/http/context.ts";
import { systemClock } from "./src/platform/clock.ts";
import { ConfigError, StartupError } from "./src/config/errors.ts";
import { formatHelp } from "./src/config/help.ts";
import {
  explainDatabaseError,
  explainListenError,
  explainSelfSignedError,
  prepareDatabasePath,
  prepareSelfSignedDir,
  readTlsFiles,
  removePidFile,
  writePidFile,
} from "./src/config/preflight.ts";
import { readConfig } from "./src/config/read_config.ts";
import { createAdminHandler } from "./src/http/admin/admin_app.ts";
import { readAdminStats } from "./src/auth/admin_tasks.ts";
import { createStatsHistory } from "./src/auth/stats_history.ts";
import { VERSION } from "./src/config/version.ts";
import { isLoopbackOrPrivate } from "./src/platform/ip.ts";
import { createJanitor } from "./src/auth/janitor.ts";
import { claimJanitorTurn } from "./src/server/janitor_turn.ts";
import { createLogger } from "./src/platform/logger.ts";
import { createMetrics } from "./src/platform/metrics.ts";
import { createStoreMetrics } from "./src/platform/store_metrics.ts";
import { createMetricsHandler } from "./src/http/metrics_handler.ts";
import { createPasswordHasher } from "./src/passwords/passwords.ts";
import { findPostgresStore, findSqliteMaintenance } from "./src/store/open_store.ts";
import type { StoreLocation } from "./src/store/store_url.ts";
import { explainPostgresOpenError } from "./src/store/postgres/explain_open.ts";
import { loadSelfSigned, type TlsCredentials } from "./src/platform/tls.ts";
import { claimPort, type PortClaim } from "./src/server/port_guard.ts";
import { dirname } from "node:path";
import { type Listener, logListening, startListener } from "./src/server/listener.ts";
import {
  createSharedGrantCounter,
  openServerStore,
  toStoreLocation,
} from "./src/server/open_server_store.ts";
import { canBindBeside, startSwappableServer } from "./src/server/swappable_server.ts";
import { type ReloadTarget, startCertReload, toReloadTarget } from "./src/server/cert_reload.ts";
import { createTlsMetrics } from "./src/platform/tls_metrics.ts";
import { createWorkerPool, type WorkerPool, WorkerStartError } from "./src/server/worker_pool.ts";
import type { Config } from "./src/config/settings.ts";
import type { Logger } from "./src/platform/logger.ts";

/** What an application embedding keygate adds to the server (see examples/donations/). */
export interface ServeOptions {
  /** The application's own secure endpoints, served after authentication. */
  secureRoutes?: Routes<SecureContext>;
  /** Prefix of start-up error messages. Default `keygate`. */
  name?: string;
}

/**
 * Runs the server until a shutdown signal; resolves to the process exit code:
 * 0 after a clean stop, 2 for a wrong setting, 1 when the system refuses one.
 * A failed start prints one line naming the flag, the value and what to do.
 */
export async function serve(
  args: string[],
  env: Record<string, string | undefined>,
  options: ServeOptions = {},
): Promise<number> {
  const started: { pidFile?: string } = {};
  try {
    return await run(args, env, options, started);
  } catch (error) {
    if (!(error instanceof ConfigError || error instanceof StartupError)) throw error;
    const hint = error instanceof ConfigError ? " (see --help)" : "";
    console.error(`${options.name ?? "keygate"}: ${error.message}${hint}`);
    return error.exitCode;
  } finally {
    if (started.pidFile !== undefined) removePidFile(started.pidFile);
  }
}

async function run(
  args: string[],
  env: Record<string, string | undefined>,
  options: ServeOptions,
  started: { pidFile?: string },
): Promise<number> {
  const config = readConfig(args, env);
  if (config === "help") {
    console.log(formatHelp());
    return 0;
  }
  if (config === "version") {
    console.log(`keygate ${VERSION}`);
    return 0;
  }
  if (config.workers > 1) {
    if (options.secureRoutes !== undefined) {
      throw new ConfigError(
        "--workers applies to keygate's own server: an application that adds its own routes " +
          "serves with one worker",
      );
    }
    // Unstable APIs exist on Deno only with their flag; reusePort is one of them in Deno 2.9.
    if (!("listenDatagram" in Deno)) {
      throw new StartupError(
        "--workers above 1 needs Deno's --unstable-net flag (reusePort is unstable in Deno 2.9): " +
          "use deno task start, or add --unstable-net to deno run",
        2,
      );
    }
  }
  const parsedStore = toStoreLocation(config);
  const storeDisplay = parsedStore.display;
  // Only a SQLite store's directory is made: on PostgreSQL nothing is written unless the
  // operator named a place (--self-signed-dir, --pid-file).
  if (parsedStore.kind === "sqlite") prepareDatabasePath(parsedStore.path);
  if (config.pidFile !== undefined) {
    writePidFile(config.pidFile);
    started.pidFile = config.pidFile;
  }
  const logger = createLogger({ level: config.logLevel });
  // Without --cert: the self-signed pair, for the public listener (unless behind a proxy, where
  // it speaks plain HTTP) and the admin listener.
  const selfSigned = config.certFile === undefined && (!config.behindProxy || config.admin)
    ? await loadSelfSignedPair(config, parsedStore)
    : undefined;
  const tls: { cert: string; key: string } | undefined = config.behindProxy
    ? undefined
    : config.certFile !== undefined && config.keyFile !== undefined
    ? await readTlsFiles(config.certFile, config.keyFile)
    : selfSigned;
  // PostgreSQL reports its queries from the start; the gauges read it once metrics exist.
  const storeMetrics = createStoreMetrics();
  // On PostgreSQL, the main thread's store (admin API, janitor) and every request worker's share
  // this counter: a revocation through any of them is seen by all on their next request.
  const sharedGrantCounter = config.workers > 1 ? createSharedGrantCounter() : undefined;
  let store;
  try {
    store = await openServerStore(config, {
      sharedGrantCounter,
      onOperation: storeMetrics.observeOperation,
      onMigrationWarning: (line) => logger.warn(line, { event: "store_migration" }),
      onListenerChange: (listening) =>
        logger[listening ? "info" : "warn"](
          listening
            ? "listening for revocations"
            : "revocation listener lost: polling until it is back",
          { event: "store_listener", db: storeDisplay },
        ),
    });
  } catch (error) {
    if (parsedStore.kind === "sqlite") throw explainDatabaseError(error, parsedStore.path);
    // One line, never the password: the URL redacted, the driver's reason and a hint after it.
    throw new StartupError(
      `Cannot open the store ${storeDisplay}: ${explainPostgresOpenError(error, parsedStore, env)}`,
      1,
    );
  }
  if (selfSigned !== undefined) warnSelfSigned(logger, selfSigned);
  let pool: WorkerPool | undefined;
  const postgresStore = findPostgresStore(store);
  if (postgresStore !== undefined) storeMetrics.attach(() => postgresStore.readPostgresStats());
  const tlsMetrics = createTlsMetrics();
  // With --workers, logins from every worker share this one pool (argon2's memory is bounded by
  // its size, not multiplied by N), and its starvation valve makes the workers give up the CPU.
  // Logins queue while their expected wait is within --login-queue-wait (for every worker alike).
  const hasher = createPasswordHasher({
    maxWaitMs: config.loginQueueWaitSeconds * 1000,
    ...(config.workers > 1 ? { yieldCpu: (ms: number) => pool?.yieldCpu(ms) } : {}),
  });
  const metrics = createMetrics({
    readPasswordQueue: () => hasher.readQueue(),
    readGrantInvalidations: () => store.readGrantInvalidations(),
    countLiveTokens: () => store.countLiveTokens(systemClock.now()),
    register: (registry) => {
      if (postgresStore !== undefined) storeMetrics.register(registry);
      tlsMetrics.register(registry);
    },
    gatherOthers: config.workers > 1 ? () => pool!.gatherMetrics() : undefined,
  });
  if (config.upstream !== undefined) {
    logger.info(`forwarding authenticated requests to ${new URL(config.upstream).origin}`, {
      hide_credentials: config.hideCredentials,
      timeout_s: config.upstreamTimeoutSeconds,
    });
  }
  const tlsPair = tls === undefined ? undefined : { cert: tls.cert, key: tls.key };
  let listener: Listener | undefined;
  let apiPort = config.port;
  let portClaim: PortClaim | undefined;
  if (config.workers > 1) {
    const where = {
      hostname: config.hostname,
      port: config.port,
      hostnameFlag: "--hostname",
      portFlag: "--port",
    };
    try {
      // The workers share the port through SO_REUSEPORT, which another process could join:
      // first make sure that no other process serves or is claiming this address.
      portClaim = claimPort(config.hostname, config.port);
      pool = createWorkerPool({
        config,
        port: portClaim.port,
        tls: tlsPair,
        hasher,
        logger,
        sharedGrantCounter,
      });
      const bound = await pool.start();
      apiPort = bound.port;
      logListening(logger, config, bound, storeDisplay);
    } catch (error) {
      portClaim?.release();
      hasher.close();
      await store.closeStore();
      if (error instanceof WorkerStartError && error.stage === "store") {
        throw new StartupError(
          `could not start ${config.workers} request workers: ${error.message}`,
          1,
        );
      }
      // The same one line as without --workers: the port in use, say.
      throw explainListenError(
        error instanceof WorkerStartError ? error.toOriginal() : error,
        where,
        config,
      );
    }
  } else {
    try {
      listener = startListener({
        config,
        tls: tlsPair,
        store,
        hasher,
        logger,
        metrics,
        secureRoutes: options.secureRoutes,
        storeDisplay,
      });
    } catch (error) {
      hasher.close();
      store.closeStore();
      throw explainListenError(error, {
        hostname: config.hostname,
        port: config.port,
        hostnameFlag: "--hostname",
        portFlag: "--port",
      }, config);
    }
  }
  const metricsServer = config.metrics
    ? listen(
      () =>
        Deno.serve({
          hostname: config.metricsHostname,
          port: config.metricsPort,
          onListen({ hostname, port }) {
            logger.info(`metrics on http://${hostname}:${port}/metrics`, { hostname, port });
          },
        }, createMetricsHandler(metrics)),
      {
        hostname: config.metricsHostname,
        port: config.metricsPort,
        hostnameFlag: "--metrics-hostname",
        portFlag: "--metrics-port",
      },
      undefined,
      () => {
        void listener?.server.shutdown();
        void pool?.drain(0);
        portClaim?.release();
        hasher.close();
        store.closeStore();
      },
    )
    : undefined;
  if (metricsServer !== undefined && !isLoopbackOrPrivate(config.metricsHostname)) {
    logger.warn("metrics are served on a public address; restrict who can reach it", {
      hostname: config.metricsHostname,
    });
  }
  // The admin API and web console: HTTPS with keygate's certificate (behind a proxy, where
  // keygate has none, the self-signed pair: see loadSelfSignedPair), never the API port.
  const history = config.admin
    ? createStatsHistory({
      read: () =>
        readAdminStats({ store, now: systemClock.now(), readCounters: metrics.readCounters }),
      clock: systemClock,
      logger,
    })
    : undefined;
  const adminTls = config.admin ? tls ?? selfSigned : undefined;
  const adminServer = adminTls === undefined ? undefined : listen(
    () =>
      startSwappableServer(
        {
          hostname: config.adminHostname,
          port: config.adminPort,
          reusePort: canBindBeside(), // a certificate reload binds beside it
          checkAddressFree: true,
          tls: adminTls,
          onListen({ hostname, port }, first) {
            if (!first) return;
            logger.info(`admin API and console on https://${hostname}:${port}/`, {
              hostname,
              port,
            });
          },
        },
        createAdminHandler({
          store,
          clock: systemClock,
          logger,
          hasher,
          readCounters: metrics.readCounters,
          defaultTimeoutSeconds: config.defaultTimeoutSeconds,
          history,
        }),
      ),
    {
      hostname: config.adminHostname,
      port: config.adminPort,
      hostnameFlag: "--admin-hostname",
      portFlag: "--admin-port",
    },
    config,
    () => {
      void listener?.server.shutdown();
      void pool?.drain(0);
      portClaim?.release();
      metricsServer?.shutdown();
      hasher.close();
      store.closeStore();
    },
  );
  history?.start();
  if (adminServer !== undefined && !isLoopbackOrPrivate(config.adminHostname)) {
    logger.warn(
      "the admin listener is on a public address; prefer 127.0.0.1 and an SSH tunnel (docs/operations.md)",
      { hostname: config.adminHostname },
    );
  }
  const janitor = createJanitor({
    store,
    clock: systemClock,
    logger,
    metrics,
    retentionSeconds: config.tokenRetentionSeconds,
    auditRetentionSeconds: config.auditRetentionSeconds,
    // N instances on one PostgreSQL database: one sweeps at a time, holding a lease row.
    claimTurn: claimJanitorTurn(store),
  });
  janitor.start();
  // SIGHUP or changed --cert/--key files: every HTTPS listener swaps to the new pair.
  const certReload = startCertReload({
    files: config.certFile === undefined
      ? undefined
      : { certFile: config.certFile, keyFile: config.keyFile! },
    serving: tlsPair ?? adminTls ?? { cert: "", key: "" },
    targets: [
      ...(tlsPair === undefined ? [] : [
        pool === undefined ? toReloadTarget("api", listener!.server) : {
          name: "api",
          port: () => apiPort,
          bind: pool.bindTls,
          retire: pool.retireTls,
        } satisfies ReloadTarget,
      ]),
      ...(adminServer === undefined ? [] : [toReloadTarget("admin", adminServer)]),
    ],
    intervalSeconds: config.certReloadIntervalSeconds,
    logger,
    metrics: tlsMetrics,
  });

  let signalled!: () => void;
  const stopping = new Promise<void>((resolve) => signalled = resolve);
  let stopRequested = false;
  const stop = () => {
    if (stopRequested) return;
    stopRequested = true;
    signalled();
    logger.info("shutting down: finishing in-flight requests", {
      deadline_seconds: config.shutdownTimeoutSeconds,
    });
    void listener?.server.shutdown();
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  await Promise.race([listener?.server.finished ?? stopping, stopping]);
  await certReload.stop();
  // From the signal on, in-flight requests have --shutdown-timeout to finish.
  let finished: boolean;
  if (pool !== undefined) finished = await pool.drain(config.shutdownTimeoutSeconds * 1000);
  else {
    let deadline: ReturnType<typeof setTimeout> | undefined;
    finished = await Promise.race([
      listener!.server.finished.then(() => true),
      new Promise<false>((resolve) => {
        deadline = setTimeout(() => resolve(false), config.shutdownTimeoutSeconds * 1000);
      }),
    ]);
    clearTimeout(deadline);
  }
  Deno.removeSignalListener("SIGINT", stop);
  Deno.removeSignalListener("SIGTERM", stop);
  if (!finished) logger.warn("shutdown deadline passed: closing with requests still in flight");
  await listener?.keyUsage.stop(); // writes the last uses before the database closes
  hasher.close();
  await janitor.stop();
  await metricsServer?.shutdown();
  await adminServer?.shutdown();
  history?.stop();
  try {
    findSqliteMaintenance(store)?.checkpointWal();
  } catch (error) {
    logger.warn("checkpoint failed", { error: String(error) });
  }
  await store.closeStore();
  certReload.close();
  portClaim?.release();
  logger.info("stopped");
  logger.flush();
  return 0;
}

/**
 * Starts a listener; a failure (port in use, bad address, unusable TLS pair) closes
 * what was opened and becomes one {@link StartupError} line.
 */
function listen<T>(
  start: () => T,
  where: Parameters<typeof explainListenError>[1],
  tls: { certFile?: string; keyFile?: string } | undefined,
  cleanup: () => void,
): T {
  try {
    return start();
  } catch (error) {
    cleanup();
    throw explainListenError(error, where, tls);
  }
}

/**
 * The self-signed pair when there is no --cert/--key: kept in --self-signed-dir, else beside a
 * SQLite database, else (PostgreSQL, :memory:) generated in memory for this process.
 */
async function loadSelfSignedPair(config: Config, store: StoreLocation): Promise<TlsCredentials> {
  let dir: string | undefined;
  let setting = "--self-signed-dir";
  if (config.selfSignedDir !== undefined) {
    dir = config.selfSignedDir;
    prepareSelfSignedDir(dir, setting);
  } else if (store.kind === "sqlite" && store.path !== ":memory:") {
    dir = dirname(store.path); // made by prepareDatabasePath
    setting = "the database's directory";
  }
  try {
    return await loadSelfSigned(dir);
  } catch (error) {
    if (dir === undefined) throw error;
    throw explainSelfSignedError(error, dir, setting);
  }
}

function warnSelfSigned(logger: Logger, pair: TlsCredentials): void {
  logger.warn(
    pair.selfSignedPath === undefined
      ? "using a self-signed certificate for localhost, made for this process and kept in " +
        "memory only (--self-signed-dir keeps one); pass --cert and --key in production"
      : `using a self-signed certificate for localhost (${pair.selfSignedPath}); ` +
        "pass --cert and --key in production",
    { sha256_fingerprint: pair.fingerprint },
  );
}

/** Dispatches `admin …` to the admin CLI and everything else to the server. */
export function main(args: string[]): Promise<number> {
  if (args[0] === "admin") return adminMain(args.slice(1));
  if (args[0] === "serve") return serve(args.slice(1), Deno.env.toObject());
  return serve(args, Deno.env.toObject());
}

if (import.meta.main) Deno.exit(await main(Deno.args));
