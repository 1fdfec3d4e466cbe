/**
 * Reads the server configuration from the settings table: command-line
 * flags over `KEYGATE_*` environment variables over defaults, each parsed by
 * its setting's parser, then checked together.
 *
 * @module
 */
import { isLoopbackOrPrivate } from "../platform/ip.ts";
import { type OptionSpec, parseArguments } from "./args.ts";
import { ConfigError } from "./errors.ts";
import { type Config, isBooleanSetting, type Setting, SETTINGS } from "./settings.ts";

/** The options the server accepts besides its settings. */
const OPTIONS: readonly OptionSpec[] = [
  ...SETTINGS.map((s): OptionSpec => ({
    name: s.flag,
    kind: isBooleanSetting(s) ? "boolean" : "value",
  })),
  { name: "help", short: "h", kind: "boolean" },
  { name: "version", kind: "boolean" },
];

/**
 * Reads the configuration from command-line arguments and environment variables.
 *
 * Returns `"help"` or `"version"` when `--help`/`-h` or `--version` was given.
 *
 * @throws {ConfigError} for an unknown flag, a stray argument or an invalid value,
 * with a message naming the flag or environment variable and the value.
 */
export function readConfig(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): Config | "help" | "version" {
  let values: Record<string, string>;
  try {
    values = parseArguments(args, OPTIONS, { positionals: false }).values;
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  if (values.help !== undefined) return "help";
  if (values.version !== undefined) return "version";

  const config: Record<string, unknown> = {};
  const given = new Set<keyof Config>();
  for (const row of SETTINGS) {
    const fromFlag = values[row.flag];
    const fromEnv = env[row.env];
    if (fromFlag !== undefined) {
      config[row.key] = parseFrom(row, `--${row.flag}`, fromFlag);
      given.add(row.key);
    } else if (fromEnv !== undefined && fromEnv !== "") {
      config[row.key] = parseFrom(row, row.env, fromEnv);
      given.add(row.key);
    } else if (row.default !== undefined) {
      config[row.key] = parseFrom(row, `default of --${row.flag}`, row.default);
    }
  }
  const result = config as unknown as Config;
  checkTogether(result, given);
  if (result.behindProxy && !given.has("hostname")) result.hostname = "127.0.0.1";
  if (result.behindProxy && !isLoopbackOrPrivate(result.hostname)) {
    throw new ConfigError(
      `Invalid --hostname "${result.hostname}" with --behind-proxy: ` +
        "plain HTTP is served only on a loopback or private address",
    );
  }
  return result;
}

function parseFrom(row: Setting, source: string, text: string): unknown {
  try {
    return row.parse(text);
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    const shown = row.secret ? "" : ` "${text.length > 80 ? `${text.slice(0, 80)}…` : text}"`;
    throw new ConfigError(`Invalid ${source}${shown}: ${error.message}`);
  }
}

/** The rules that involve more than one setting. */
function checkTogether(config: Config, given: ReadonlySet<keyof Config>): void {
  if (given.has("store") && given.has("dbPath")) {
    throw new ConfigError("Invalid store settings: give --store or --db, not both");
  }
  if ((config.certFile === undefined) !== (config.keyFile === undefined)) {
    throw new ConfigError(
      `Invalid TLS settings: --cert and --key go together (only --${
        config.certFile === undefined ? "key" : "cert"
      } is set)`,
    );
  }
  if (config.metrics && config.metricsPort !== 0 && config.metricsPort === config.port) {
    throw new ConfigError(
      `Invalid --metrics-port "${config.metricsPort}": metrics are never served on the public port`,
    );
  }
  if (
    config.admin && config.adminPort !== 0 &&
    (config.adminPort === config.port ||
      (config.metrics && config.adminPort === config.metricsPort))
  ) {
    throw new ConfigError(
      `Invalid --admin-port "${config.adminPort}": the admin listener never shares the public or the metrics port`,
    );
  }
  if (!config.behindProxy) return;
  if (config.certFile !== undefined) {
    throw new ConfigError(
      "Invalid TLS settings: --cert and --key do not apply with --behind-proxy",
    );
  }
  if (config.trustedProxies.length === 0) {
    throw new ConfigError(
      `Invalid --trusted-proxies: --behind-proxy needs at least one range${
        given.has("trustedProxies") ? "" : " (the default was replaced by an empty value)"
      }`,
    );
  }
}
