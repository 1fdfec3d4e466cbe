/**
 * keygate's composition root: read the configuration, open the store, build
 * the handler, serve HTTPS, flush key usage periodically; on SIGINT/SIGTERM
 * stop accepting, finish in-flight requests, flush key usage, close the
 * database.
 *
 * `keygate admin …` (or `deno task admin …`) runs the admin CLI instead, so
 * that a compiled binary carries both.
 *
 * @module
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { main as adminMain } from "./scripts/admin.ts";
import { createHandler } from "./src/app.ts";
import { systemClock } from "./src/clock.ts";
import { ConfigError, formatHelp, readConfig } from "./src/config.ts";
import { createKeyUsageRecorder } from "./src/key_usage.ts";
import { createLogger } from "./src/logger.ts";
import { createPasswordHasher } from "./src/passwords.ts";
import { openStore } from "./src/store.ts";
import { loadTlsCredentials } from "./src/tls.ts";

/** Runs the server until a shutdown signal; resolves to the process exit code. */
export async function serve(args: string[], env: Record<string, string | undefined>) {
  let config;
  try {
    config = readConfig(args, env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`keygate: ${error.message} (see --help)`);
    return 2;
  }
  if (config === undefined) {
    console.log(formatHelp());
    return 0;
  }
  const logger = createLogger({ level: config.logLevel });
  mkdirSync(dirname(config.dbPath), { recursive: true });
  const store = openStore(config.dbPath);
  const tls = await loadTlsCredentials(config);
  if (tls.selfSignedPath !== undefined) {
    logger.warn(
      `using a self-signed certificate for localhost (${tls.selfSignedPath}); pass --cert and --key in production`,
    );
  }
  const keyUsage = createKeyUsageRecorder({ store, clock: systemClock, logger });
  const handler = createHandler({
    store,
    hasher: createPasswordHasher(),
    clock: systemClock,
    logger,
    defaultTimeoutSeconds: config.defaultTimeoutSeconds,
    corsOrigins: config.corsOrigins,
    keyUsage,
    upstream: config.upstream === undefined ? undefined : {
      url: new URL(config.upstream),
      timeoutMs: config.upstreamTimeoutSeconds * 1000,
      hideCredentials: config.hideCredentials,
    },
  });
  if (config.upstream !== undefined) {
    logger.info(`forwarding authenticated requests to ${new URL(config.upstream).origin}`, {
      hide_credentials: config.hideCredentials,
      timeout_s: config.upstreamTimeoutSeconds,
    });
  }
  const server = Deno.serve({
    hostname: config.hostname,
    port: config.port,
    cert: tls.cert,
    key: tls.key,
    onListen({ hostname, port }) {
      const host = hostname === "0.0.0.0" || hostname === "::" ? "localhost" : hostname;
      logger.info(`keygate listening on https://${host}:${port}/`, {
        hostname,
        port,
        db: config.dbPath,
      });
    },
  }, handler);

  const stop = () => {
    logger.info("shutting down: finishing in-flight requests");
    server.shutdown();
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  keyUsage.start();
  await server.finished;
  keyUsage.stop(); // writes the last uses before the database closes
  Deno.removeSignalListener("SIGINT", stop);
  Deno.removeSignalListener("SIGTERM", stop);
  store.close();
  logger.info("stopped");
  return 0;
}

/** Dispatches `admin …` to the admin CLI and everything else to the server. */
export function main(args: string[]): Promise<number> {
  if (args[0] === "admin") return adminMain(args.slice(1));
  if (args[0] === "serve") return serve(args.slice(1), Deno.env.toObject());
  return serve(args, Deno.env.toObject());
}

if (import.meta.main) Deno.exit(await main(Deno.args));
