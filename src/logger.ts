/**
 * Structured logging: one JSON object a line, so values can never forge lines.
 *
 * Callers pass identifiers (request id, key id, user id), never secrets; the
 * request path is logged with {@link redactUrl}.
 *
 * @module
 */

/** How much to log; `off` logs nothing. */
export type LogLevel = "debug" | "info" | "warn" | "error" | "off";

/** Fields of a log line besides `time`, `level` and `msg`. */
export type LogFields = Record<string, string | number | boolean | null | undefined>;

/** A structured logger. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  level: LogLevel;
  /** Receives each finished line, without its newline. Default: standard output. */
  write?: (line: string) => void;
  clock?: { now(): number };
}

const RANKS: Readonly<Record<LogLevel, number>> = {
  debug: 10,
  info: 20,
  warn: 30,
  error: 40,
  off: 100,
};

const encoder = new TextEncoder();

function writeStdout(line: string): void {
  const bytes = encoder.encode(line + "\n");
  let written = 0;
  while (written < bytes.length) written += Deno.stdout.writeSync(bytes.subarray(written));
}

/** Creates a logger that writes JSON lines at or above `level`. */
export function createLogger(options: LoggerOptions): Logger {
  const threshold = RANKS[options.level];
  const write = options.write ?? writeStdout;
  const clock = options.clock ?? Date;
  const log = (level: LogLevel) => (msg: string, fields?: LogFields) => {
    if (RANKS[level] < threshold) return;
    write(JSON.stringify({ time: new Date(clock.now()).toISOString(), level, msg, ...fields }));
  };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

/** A logger that drops everything, for tests and tools. */
export const silentLogger: Logger = createLogger({ level: "off", write: () => {} });

/** Query parameters whose values are secrets. */
const SECRET_PARAMS = new Set(["api_key", "api_token", "access_token", "token", "password"]);

/** `path?query` with the values of secret query parameters replaced by `REDACTED`. */
export function redactUrl(url: URL): string {
  if (url.search === "") return url.pathname;
  const params = new URLSearchParams(url.search);
  for (const name of new Set(params.keys())) {
    if (SECRET_PARAMS.has(name.toLowerCase())) params.set(name, "REDACTED");
  }
  return `${url.pathname}?${params}`;
}
