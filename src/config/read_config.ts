/**
 * Reads the server configuration from the settings table: command-line
 * flags over `KEYGATE_*` environment variables over defaults, each parsed by
 * its setting's parser, then checked together.
 *
 * A flag overrides the environment variable of the same setting only. Two
 * settings that exclude each other (`--store` and `--db`, say) are refused
 * together wherever each came from: a flag does not silently beat the
 * environment of another setting, since the one discarded may be the one
 * meant (a `KEYGATE_STORE` in an `EnvironmentFile` and a `--db` left in
 * `ExecStart` would start a second, empty database). Every message about
 * settings together says where each came from.
 *
 * @module
 */
import { isLoopbackOrPrivate } from "../platform/ip.ts";
import { redactCredentials } from "../store/store_url.ts";
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

/** Where a setting's value came from. */
export type Source = "flag" | "env" | "default";

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
  const sources = new Map<keyof Config, Source>();
  for (const row of SETTINGS) {
    const fromFlag = values[row.flag];
    const fromEnv = env[row.env];
    if (fromFlag !== undefined) {
      config[row.key] = parseFrom(row, `--${row.flag}`, fromFlag);
      sources.set(row.key, "flag");
    } else if (fromEnv !== undefined && fromEnv !== "") {
      config[row.key] = parseFrom(row, row.env, fromEnv);
      sources.set(row.key, "env");
    } else if (row.default !== undefined) {
      config[row.key] = parseFrom(row, `default of --${row.flag}`, row.default);
      sources.set(row.key, "default");
    }
  }
  const result = config as unknown as Config;
  const from = (key: keyof Config) => sources.get(key);
  checkTogether(result, from);
  if (result.behindProxy && from("hostname") === "default") result.hostname = "127.0.0.1";
  if (result.behindProxy && !isLoopbackOrPrivate(result.hostname)) {
    throw new ConfigError(
      `Invalid --hostname "${result.hostname}" with --behind-proxy: ` +
        "plain HTTP is served only on a loopback or private address " +
        `(${whence(from, "hostname")}; ${whence(from, "behindProxy")})`,
    );
  }
  return result;
}

/**
 * A value as error messages show it: without a password (a URL's, or one
 * typed where a path was expected), and at most 80 characters.
 */
export function showValue(text: string): string {
  const shown = redactCredentials(text);
  return shown.length > 80 ? `${shown.slice(0, 80)}…` : shown;
}

function parseFrom(row: Setting, source: string, text: string): unknown {
  try {
    return row.parse(text);
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    throw new ConfigError(`Invalid ${source} "${showValue(text)}": ${error.message}`);
  }
}

function rowOf(key: keyof Config): Setting {
  return SETTINGS.find((row) => row.key === key)!;
}

/**
 * Where a setting came from, as a clause: `--db is on the command line`,
 * `KEYGATE_STORE is set in the environment`, `--port is its default`.
 */
export function describeSource(row: Pick<Setting, "flag" | "env">, source: Source | undefined) {
  if (source === "flag") return `--${row.flag} is on the command line`;
  if (source === "env") return `${row.env} is set in the environment`;
  return `--${row.flag} is its default`;
}

function whence(from: (key: keyof Config) => Source | undefined, key: keyof Config): string {
  return describeSource(rowOf(key), from(key));
}

/** The rules that involve more than one setting; each names where its settings came from. */
function checkTogether(config: Config, from: (key: keyof Config) => Source | undefined): void {
  const given = (key: keyof Config) => from(key) === "flag" || from(key) === "env";
  if (given("store") && given("dbPath")) {
    throw new ConfigError(
      "Invalid store settings: give --store or --db, not both " +
        `(${whence(from, "store")}; ${whence(from, "dbPath")})`,
    );
  }
  if (config.portal && (config.smtpUrl === undefined || config.mailFrom === undefined)) {
    throw new ConfigError(
      "Invalid portal settings: --portal on needs --smtp-url and --mail-from " +
        `(${whence(from, "portal")})`,
    );
  }
  if (config.portal && config.portalOrigin === undefined) {
    throw new ConfigError(
      "Invalid portal settings: --portal on needs --portal-origin, the origin its mail links " +
        `point to (${whence(from, "portal")})`,
    );
  }
  if (config.portal && config.portalSecretFile === undefined) {
    throw new ConfigError(
      "Invalid portal settings: --portal on needs --portal-secret-file, the key of its one-time " +
        `codes' digests (openssl rand -out FILE 32) (${whence(from, "portal")})`,
    );
  }
  if (config.portalMode === "domains" && config.portalDomains === undefined) {
    throw new ConfigError(
      "Invalid portal settings: --portal-mode domains needs --portal-domains " +
        `(${whence(from, "portalMode")})`,
    );
  }
  if ((config.certFile === undefined) !== (config.keyFile === undefined)) {
    const set = rowOf(config.certFile === undefined ? "keyFile" : "certFile");
    const by = from(set.key) === "env" ? `by ${set.env} in the environment` : "on the command line";
    throw new ConfigError(
      `Invalid TLS settings: --cert and --key go together (only --${set.flag} is set, ${by})`,
    );
  }
  if (config.selfSignedDir !== undefined && config.certFile !== undefined) {
    throw new ConfigError(
      "Invalid TLS settings: --self-signed-dir applies only without --cert and --key " +
        `(${whence(from, "selfSignedDir")}; ${whence(from, "certFile")})`,
    );
  }
  if (config.metrics && config.metricsPort !== 0 && config.metricsPort === config.port) {
    throw new ConfigError(
      `Invalid --metrics-port "${config.metricsPort}": metrics are never served on the public ` +
        `port (${whence(from, "metricsPort")}; ${whence(from, "port")})`,
    );
  }
  if (config.admin && config.adminPort !== 0) {
    const clash: keyof Config | undefined = config.adminPort === config.port
      ? "port"
      : config.metrics && config.adminPort === config.metricsPort
      ? "metricsPort"
      : undefined;
    if (clash !== undefined) {
      throw new ConfigError(
        `Invalid --admin-port "${config.adminPort}": the admin listener never shares the ` +
          `public or the metrics port (${whence(from, "adminPort")}; ${whence(from, clash)})`,
      );
    }
  }
  if (!config.behindProxy) return;
  if (config.certFile !== undefined) {
    throw new ConfigError(
      "Invalid TLS settings: --cert and --key do not apply with --behind-proxy " +
        `(${whence(from, "behindProxy")}; ${whence(from, "certFile")})`,
    );
  }
  if (config.trustedProxies.length === 0) {
    throw new ConfigError(
      `Invalid --trusted-proxies: --behind-proxy needs at least one range (${
        whence(from, "trustedProxies")
      }, and empty)`,
    );
  }
}
