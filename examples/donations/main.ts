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
import { createHandler } from "../../src/app.ts";
import { systemClock } from "../../src/clock.ts";
import { ConfigError } from "../../src/config/errors.ts";
import { formatHelp } from "../../src/config/help.ts";
import { readConfig } from "../../src/config/read_config.ts";
import { VERSION } from "../../src/config/version.ts";
import { createLogger } from "../../src/logger.ts";
import { createPasswordHasher } from "../../src/passwords.ts";
import { openStore } from "../../src/store.ts";
import { loadTlsCredentials } from "../../src/tls.ts";
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
  if (config === "help" || config === "version") {
    console.log(config === "help" ? formatHelp() : `keygate ${VERSION}`);
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
