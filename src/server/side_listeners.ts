/**
 * The main thread's listeners besides the API: `/metrics` (plain HTTP) and
 * the admin API and web console (HTTPS, with the dashboard's stats history).
 * Each starts as an `AsyncDisposable` that shuts it down; a failure to bind
 * is one line naming the flag.
 *
 * @module
 */
import { readAdminStats } from "../auth/admin_tasks.ts";
import { createStatsHistory } from "../auth/stats_history.ts";
import { explainListenError } from "../config/preflight.ts";
import type { Config } from "../config/settings.ts";
import { createAdminHandler } from "../http/admin/admin_app.ts";
import { createMetricsHandler } from "../http/metrics_handler.ts";
import { systemClock } from "../platform/clock.ts";
import { isLoopbackOrPrivate } from "../platform/ip.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { type AdminServices, composeAdminDeps } from "./compose.ts";
import { canBindBeside, startSwappableServer, type SwappableServer } from "./swappable_server.ts";

/** Serves `/metrics` on `--metrics-hostname`:`--metrics-port`; disposing shuts it down. */
export function startMetricsListener(
  config: Config,
  services: { metrics: Metrics; logger: Logger },
): AsyncDisposable {
  const { logger } = services;
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({
      hostname: config.metricsHostname,
      port: config.metricsPort,
      onListen({ hostname, port }) {
        logger.info(`metrics on http://${hostname}:${port}/metrics`, { hostname, port });
      },
    }, createMetricsHandler(services.metrics));
  } catch (error) {
    throw explainListenError(error, {
      hostname: config.metricsHostname,
      port: config.metricsPort,
      hostnameFlag: "--metrics-hostname",
      portFlag: "--metrics-port",
    });
  }
  if (!isLoopbackOrPrivate(config.metricsHostname)) {
    logger.warn("metrics are served on a public address; restrict who can reach it", {
      hostname: config.metricsHostname,
    });
  }
  return { [Symbol.asyncDispose]: () => server.shutdown() };
}

/** The running admin listener. */
export interface AdminListener extends AsyncDisposable {
  server: SwappableServer;
}

/**
 * Serves the admin API and web console over HTTPS with `tls` on `--admin-hostname`:
 * `--admin-port`, and samples the dashboard's history; disposing shuts both down.
 */
export function startAdminListener(
  config: Config,
  tls: { cert: string; key: string },
  services: Omit<AdminServices, "history">,
): AdminListener {
  const { logger } = services;
  const history = createStatsHistory({
    read: () =>
      readAdminStats({
        store: services.store,
        now: systemClock.now(),
        readCounters: services.metrics.readCounters,
      }),
    clock: systemClock,
    logger,
  });
  let server: SwappableServer;
  try {
    server = startSwappableServer({
      hostname: config.adminHostname,
      port: config.adminPort,
      reusePort: canBindBeside(), // a certificate reload binds beside it
      checkAddressFree: true,
      tls,
      onListen({ hostname, port }, first) {
        if (first) {
          logger.info(`admin API and console on https://${hostname}:${port}/`, { hostname, port });
        }
      },
    }, createAdminHandler(composeAdminDeps(config, { ...services, history })));
  } catch (error) {
    throw explainListenError(error, {
      hostname: config.adminHostname,
      port: config.adminPort,
      hostnameFlag: "--admin-hostname",
      portFlag: "--admin-port",
    }, config);
  }
  history.start();
  if (!isLoopbackOrPrivate(config.adminHostname)) {
    logger.warn(
      "the admin listener is on a public address; prefer 127.0.0.1 and an SSH tunnel (docs/operations.md)",
      { hostname: config.adminHostname },
    );
  }
  return {
    server,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      history.stop();
    },
  };
}
