/**
 * keygate with the example donations endpoint mounted in the same process.
 *
 * ```sh
 * deno task example:donations --port 8443
 * ```
 *
 * It takes the same flags and `KEYGATE_*` variables as `deno task start`.
 *
 * @module
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { createHandler } from "../../src/http/app.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { ConfigError, formatHelp, readConfig } from "../../src/config.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { openStore } from "../../src/store/sqlite/store.ts";
import { loadTlsCredentials } from "../../src/platform/tls.ts";
import { createDonationLedger, createDonationRoutes } from "./donations.ts";

async function main(args: string[]): Promise<number> {
  let config;
  try {
    config = readConfig(args, Deno.env.toObject());
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`donations example: ${error.message} (see --help)`);
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
  const handler = createHandler({
    store,
    hasher: createPasswordHasher(),
    clock: systemClock,
    logger,
    defaultTimeoutSeconds: config.defaultTimeoutSeconds,
    corsOrigins: config.corsOrigins,
    // The application's own secure endpoints: keygate authenticates, then calls them.
    secureRoutes: createDonationRoutes(createDonationLedger(), systemClock),
  });
  const server = Deno.serve(
    { hostname: config.hostname, port: config.port, cert: tls.cert, key: tls.key },
    handler,
  );
  const stop = () => server.shutdown();
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  await server.finished;
  store.close();
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
