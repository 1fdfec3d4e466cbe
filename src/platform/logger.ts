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
  /** Whether lines of `level` are written (to skip building them otherwise). */
  enabled(level: Exclude<LogLevel, "off">): boolean;
  /** Writes buffered lines now; call before the process exits. */
  flush(): void;
}

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  level: LogLevel;
  /**
   * Receives each finished line, without its newline. Default: standard
   * output, buffered (see {@link Logger.flush}).
   */
  write?: (line: string) => void;
  clock?: { now(): number };
  /**
   * Standard output only: write at most this many bytes per system call, cut
   * at line ends. Request workers (`--workers`) share standard output, and a
   * pipe keeps a write whole only up to `PIPE_BUF` (4096 bytes on Linux):
   * larger batches from two threads could interleave within a line.
   */
  atomicWriteBytes?: number;
}

const RANKS: Readonly<Record<LogLevel, number>> = {
  debug: 10,
  info: 20,
  warn: 30,
  error: 40,
  off: 100,
};

const encoder = new TextEncoder();

/** Lines held before a write to standard output; a full buffer is written at once. */
const MAX_BUFFERED_LINES = 256;
/** Longest a line waits in the buffer. */
const FLUSH_AFTER_MS = 10;

/**
 * Cuts `bytes` (whole lines, each ending in a newline) into `[start, end)`
 * ranges of at most `limit` bytes that end at a line end; a line longer than
 * `limit` is a range of its own.
 */
export function toLineChunks(bytes: Uint8Array, limit: number): [number, number][] {
  const chunks: [number, number][] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.length;
    if (end - start > limit) {
      const lastEnd = bytes.lastIndexOf(10, start + limit - 1);
      end = lastEnd >= start ? lastEnd + 1 : bytes.indexOf(10, start + limit) + 1 || bytes.length;
    }
    chunks.push([start, end]);
    start = end;
  }
  return chunks;
}

/** Bytes of lines held before a write to standard output. */
const BUFFER_BYTES = 64 * 1024;

/**
 * Standard output, written in batches: one system call per
 * {@link FLUSH_AFTER_MS}, {@link MAX_BUFFERED_LINES} lines or
 * {@link BUFFER_BYTES} rather than one per request. Each line is encoded
 * into the batch's buffer as it comes, so no line outlives its request as a
 * string (strings held for a batch were copied by every young-generation
 * collection meanwhile). Errors are written at once. A failed write drops
 * its lines (counted on standard error) rather than failing a request.
 */
function createStdoutWriter(
  atomicWriteBytes = Infinity,
): { write(line: string, urgent: boolean): void; flush(): void } {
  const buffer = new Uint8Array(BUFFER_BYTES);
  let used = 0;
  let count = 0;
  let dropped = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  function writeOut(bytes: Uint8Array, lines: number): void {
    try {
      for (const [start, end] of toLineChunks(bytes, atomicWriteBytes)) {
        let written = start;
        while (written < end) written += Deno.stdout.writeSync(bytes.subarray(written, end));
      }
    } catch (error) {
      // A closed or broken standard output must not take requests (or the process) down.
      dropped += lines;
      try {
        console.error(`keygate: ${dropped} log line(s) lost: ${String(error)}`);
      } catch {
        // Nowhere left to say it.
      }
    }
  }
  function flush(): void {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (count === 0) return;
    const lines = count;
    const bytes = buffer.subarray(0, used);
    used = 0;
    count = 0;
    writeOut(bytes, lines);
  }
  function append(line: string): void {
    // A UTF-8 line takes at most 3 bytes per UTF-16 unit, plus its newline.
    if (used + line.length * 3 + 1 > BUFFER_BYTES) {
      flush();
      if (line.length * 3 + 1 > BUFFER_BYTES) return writeOut(encoder.encode(line + "\n"), 1);
    }
    used += encoder.encodeInto(line, buffer.subarray(used)).written;
    buffer[used++] = 10;
    count++;
  }
  return {
    write(line, urgent) {
      append(line);
      if (urgent || count >= MAX_BUFFERED_LINES) return flush();
      if (timer === undefined) {
        const scheduled = setTimeout(flush, FLUSH_AFTER_MS);
        Deno.unrefTimer(scheduled);
        timer = scheduled;
      }
    },
    flush,
  };
}

/**
 * The ISO 8601 time of `ms`, computed once per millisecond: under load many
 * lines share one, and `toISOString()` is a good part of a line's cost.
 */
function createTimeFormatter(): (ms: number) => string {
  let lastMs = NaN;
  let lastText = "";
  return (ms) => {
    if (ms !== lastMs) {
      lastMs = ms;
      lastText = new Date(ms).toISOString();
    }
    return lastText;
  };
}

/**
 * One log line. The fields are serialised as given, after `time`, `level`
 * and `msg`; only a field that would repeat one of those three needs the
 * slower merge (the fields win, as before).
 */
function toLine(time: string, level: LogLevel, msg: string, fields: LogFields | undefined): string {
  const head = `{"time":"${time}","level":"${level}","msg":${JSON.stringify(msg)}`;
  if (fields === undefined) return head + "}";
  if ("time" in fields || "level" in fields || "msg" in fields) {
    return JSON.stringify({ time, level, msg, ...fields });
  }
  const rest = JSON.stringify(fields);
  return rest === "{}" ? head + "}" : head + "," + rest.slice(1);
}

/**
 * An error's message for a log field or a one-line report: its `message` when it has one (an
 * `Error`, or an error-like value from a worker), else the value, as a string.
 */
export function toErrorText(error: unknown): string {
  return String((error as { message?: unknown } | null | undefined)?.message ?? error);
}

/** Creates a logger that writes JSON lines at or above `level`. */
export function createLogger(options: LoggerOptions): Logger {
  const threshold = RANKS[options.level];
  const stdout = options.write === undefined
    ? createStdoutWriter(options.atomicWriteBytes)
    : undefined;
  const write = options.write ?? ((line: string, urgent: boolean) => stdout!.write(line, urgent));
  const clock = options.clock ?? Date;
  const formatTime = createTimeFormatter();
  const log = (level: LogLevel) => (msg: string, fields?: LogFields) => {
    if (RANKS[level] < threshold) return;
    write(
      toLine(formatTime(clock.now()), level, msg, fields),
      // Errors are written at once; warnings (failed logins, throttling) can come in floods
      // and are batched like everything else.
      RANKS[level] >= RANKS.error,
    );
  };
  return {
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    enabled: (level) => RANKS[level] >= threshold,
    flush: () => stdout?.flush(),
  };
}

/** A logger that drops everything, for tests and tools. */
export const silentLogger: Logger = createLogger({ level: "off", write: () => {} });

/** Query parameters whose values are secrets. */
const SECRET_PARAMS = new Set([
  "api_key",
  "api_token",
  "access_token",
  "token",
  "password",
  "client_secret",
]);
const SECRET_VALUES = /([?&])(api_key|api_token|access_token|token|password|client_secret)=[^&]*/gi;

/**
 * `path?query` (`search` is `""` or starts with `?`) with the values of
 * secret query parameters replaced by `REDACTED`.
 */
export function redactTarget(path: string, search: string): string {
  if (search === "") return path;
  // Fast path: with nothing encoded, names are as written and a regex suffices.
  if (!search.includes("%") && !search.includes("+")) {
    return path + search.replace(SECRET_VALUES, "$1$2=REDACTED");
  }
  const params = new URLSearchParams(search);
  for (const name of new Set(params.keys())) {
    if (SECRET_PARAMS.has(name.toLowerCase())) params.set(name, "REDACTED");
  }
  return `${path}?${params}`;
}
