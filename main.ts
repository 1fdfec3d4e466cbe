/**
 * keygate's composition root: read the configuration, then start each part
 * of the server on one `AsyncDisposableStack` — the pid file, the stop
 * signals, the store, the password pool, the metrics and admin listeners, the
 * janitor, the API (one listener, or N request workers), the certificate
 * reload — and serve until SIGINT/SIGTERM. A failed start and a normal stop
 * then close the same way: everything started so far, in reverse order,
 * awaited. On a stop that order is: certificate reloads stop, the API stops
 * accepting and finishes its requests within --shutdown-timeout and writes
 * its last key uses, the janitor stops, the admin and metrics listeners
 * close, the password pool stops, the store is checkpointed and closed, the
 * port claim, the signal listeners and the pid file go last.
 *
 * `keygate admin …` (or `deno task admin …`) runs the admin CLI instead, so
 * that a compiled binary carries both.
 *
 * @module
 */
import { main as adminMain } from "./src/cli/main.ts";
import { ConfigError, StartupError } from "./src/config/errors.ts";
import { readPortalSecretFile } from "./src/config/portal_secret.ts";
import { formatHelp } from "./src/config/help.ts";
import { prepareDatabasePath } from "./src/config/preflight.ts";
import { readConfig } from "./src/config/read_config.ts";
import type { Config } from "./src/config/settings.ts";
import { VERSION } from "./src/config/version.ts";
import type { SecureContext } from "./src/http/context.ts";
import type { Routes } from "./src/http/route.ts";
import { createPasswordHasher } from "./src/passwords/passwords.ts";
import { systemClock } from "./src/platform/clock.ts";
import { createLogger, type Logger } from "./src/platform/logger.ts";
import { createMetrics } from "./src/platform/metrics.ts";
import { createStoreMetrics } from "./src/platform/store_metrics.ts";
import { createTlsMetrics } from "./src/platform/tls_metrics.ts";
import { startCertReload } from "./src/server/cert_reload.ts";
import { loadCertificates, warnSelfSigned } from "./src/server/certificates.ts";
import {
  createSharedGrantCounter,
  openMainStore,
  toStoreLocation,
} from "./src/server/open_server_store.ts";
import { holdPidFile, listenForStop } from "./src/server/process.ts";
import { createFatalStop, FATAL_EXIT_CODE } from "./src/server/fatal_stop.ts";
import type { WalSyncRunner } from "./src/store/sqlite/wal_sync.ts";
import { startAdminListener, startMetricsListener } from "./src/server/side_listeners.ts";
import { type ServedApi, startApi } from "./src/server/start_api.ts";
import { startJanitor } from "./src/server/start_janitor.ts";
import { readMailStates, startMailer } from "./src/server/start_mailer.ts";
import { toReloadTarget } from "./src/server/cert_reload.ts";

/** What an application embedding keygate adds to the server (see examples/donations/). */
export interface ServeOptions {
  /** The application's own secure endpoints, served after authentication. */
  secureRoutes?: Routes<SecureContext>;
  /** Prefix of start-up error messages. Default `keygate`. */
  name?: string;
  /**
   * Runs the main thread's SQLite WAL syncs (see `SqliteStoreOptions.runWalSync`); for tests,
   * which fail one to see the server stop. Default: runs the sync.
   */
  runWalSync?: WalSyncRunner;
}

/**
 * Runs the server until a shutdown signal; resolves to the process exit code:
 * 0 after a clean stop, 2 for a wrong setting, 1 when the system refuses one.
 * A failed start prints one line naming the flag, the value and what to do.
 * Whether it resolves or throws, nothing it opened is left open.
 */
export async function serve(
  args: string[],
  env: Record<string, string | undefined>,
  options: ServeOptions = {},
): Promise<number> {
  try {
    return await run(args, env, options);
  } catch (thrown) {
    // A part that failed to close while a start failed: the start's error is the one to tell.
    let error = thrown;
    while (error instanceof SuppressedError) error = error.suppressed;
    if (!(error instanceof ConfigError || error instanceof StartupError)) throw thrown;
    const hint = error instanceof ConfigError ? " (see --help)" : "";
    console.error(`${options.name ?? "keygate"}: ${error.message}${hint}`);
    return error.exitCode;
  }
}

async function run(
  args: string[],
  env: Record<string, string | undefined>,
  options: ServeOptions,
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
  checkWorkers(config, options);
  // The portal's code key (readConfig requires it): an unreadable or short file stops the start
  // here, in one line.
  if (config.portal) readPortalSecretFile(config.portalSecretFile!);
  const logger = createLogger({ level: config.logLevel });
  const code = await serveUntilStopped(config, env, options, logger);
  logger.info("stopped", code === 0 ? undefined : { exit_code: code });
  logger.flush();
  return code;
}

/** Starts every part, serves until a stop signal, and closes what it started (see @module). */
async function serveUntilStopped(
  config: Config,
  env: Record<string, string | undefined>,
  options: ServeOptions,
  logger: Logger,
): Promise<number> {
  await using parts = new AsyncDisposableStack();
  const location = toStoreLocation(config);
  // Only a SQLite store's directory is made: on PostgreSQL nothing is written unless the
  // operator named a place (--self-signed-dir, --pid-file).
  if (location.kind === "sqlite") prepareDatabasePath(location.path);
  if (config.pidFile !== undefined) parts.use(holdPidFile(config.pidFile));
  const stop = parts.use(listenForStop(logger, config));
  // A failed WAL sync (any worker's store or this thread's) stops the server: exit 1, restart.
  const fatal = createFatalStop(logger);
  const certificates = await loadCertificates(config, location);
  // PostgreSQL reports its queries from the start; the gauges read it once metrics exist.
  const storeMetrics = createStoreMetrics();
  // On PostgreSQL, the main thread's store (admin API, janitor) and every request worker's share
  // this counter: a revocation through any of them is seen by all on their next request.
  const sharedGrantCounter = config.workers > 1 ? createSharedGrantCounter() : undefined;
  const { store, postgres } = parts.use(
    await openMainStore(config, env, {
      logger,
      onOperation: storeMetrics.observeOperation,
      onChangeDelay: storeMetrics.observeChangeDelay,
      sharedGrantCounter,
      onFatal: fatal.raise,
      runWalSync: options.runWalSync,
    }),
  );
  warnSelfSigned(logger, certificates);
  if (postgres !== undefined) storeMetrics.attach(() => postgres.readPostgresStats());
  // The API starts last, so that it is the first to stop (see @module); the pool and the
  // metrics reach its request workers through this.
  const late: { api?: ServedApi } = {};
  // With --workers, logins from every worker share this one pool (argon2's memory is bounded by
  // its size, not multiplied by N), and its starvation valve makes the workers give up the CPU.
  // Logins queue while their expected wait is within --login-queue-wait (for every worker alike).
  const hasher = parts.adopt(
    createPasswordHasher({
      maxWaitMs: config.loginQueueWaitSeconds * 1000,
      ...(config.workers > 1 ? { yieldCpu: (ms: number) => late.api?.yieldCpu(ms) } : {}),
    }),
    (hasher) => hasher.close(),
  );
  const tlsMetrics = createTlsMetrics();
  const metrics = createMetrics({
    readPasswordQueue: () => hasher.readQueue(),
    readGrantInvalidations: () => store.readGrantInvalidations(),
    countLiveTokens: () => store.countLiveTokens(systemClock.now()),
    countMail: config.portal ? () => readMailStates(store) : undefined,
    register: (registry) => {
      if (postgres !== undefined) storeMetrics.register(registry);
      tlsMetrics.register(registry);
    },
    gatherOthers: config.workers > 1
      ? () => late.api?.gatherMetrics() ?? Promise.resolve([])
      : undefined,
  });
  logUpstream(logger, config);
  if (config.metrics) parts.use(startMetricsListener(config, { metrics, logger }));
  const admin = certificates.admin === undefined
    ? undefined
    : parts.use(startAdminListener(config, certificates.admin, { store, hasher, logger, metrics }));
  parts.use(startJanitor(config, { store, logger, metrics, leases: postgres }));
  // The portal's outbox: sent from the main thread; stops after the API, so a change's mail
  // queued during the drain is still tried (or waits in the outbox for the next start).
  const mailer = config.portal
    ? parts.use(startMailer({
      store,
      clock: systemClock,
      logger,
      smtpUrl: config.smtpUrl!,
      from: config.mailFrom!,
    }))
    : undefined;
  const api = late.api = parts.use(
    await startApi(config, {
      services: { store, hasher, logger, metrics, secureRoutes: options.secureRoutes, mailer },
      tls: certificates.api,
      storeDisplay: location.display,
      sharedGrantCounter,
      onFatal: fatal.raise,
    }),
  );
  // SIGHUP or changed --cert/--key files: every HTTPS listener swaps to the new pair.
  parts.use(startCertReload({
    files: config.certFile === undefined
      ? undefined
      : { certFile: config.certFile, keyFile: config.keyFile! },
    serving: certificates.api ?? certificates.admin ?? { cert: "", key: "" },
    targets: [
      ...(api.reloadTarget === undefined ? [] : [api.reloadTarget]),
      ...(admin === undefined ? [] : [toReloadTarget("admin", admin.server)]),
    ],
    intervalSeconds: config.certReloadIntervalSeconds,
    logger,
    metrics: tlsMetrics,
  }));
  await Promise.race([stop.requested, api.finished, fatal.requested]);
  return fatal.raised() ? FATAL_EXIT_CODE : 0;
}

/** `--workers` above 1 serves keygate's own routes only, and needs reusePort. */
function checkWorkers(config: Config, options: ServeOptions): void {
  if (config.workers <= 1) return;
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

function logUpstream(logger: Logger, config: Config): void {
  if (config.upstream === undefined) return;
  logger.info(`forwarding authenticated requests to ${new URL(config.upstream).origin}`, {
    hide_credentials: config.hideCredentials,
    timeout_s: config.upstreamTimeoutSeconds,
  });
}

/** Dispatches `admin …` to the admin CLI and everything else to the server. */
export function main(args: string[]): Promise<number> {
  if (args[0] === "admin") return adminMain(args.slice(1));
  if (args[0] === "serve") return serve(args.slice(1), Deno.env.toObject());
  return serve(args, Deno.env.toObject());
}

if (import.meta.main) Deno.exit(await main(Deno.args));
