/**
 * Runs `wrk` for the benchmark and reads its result, including how busy wrk
 * itself was: its user plus system CPU time (the shell's `times` after wrk
 * exits, i.e. wrk's rusage) over the wall time of the run.
 *
 * Two kinds of load:
 * - **fixed**: one request, built once per wrk thread (a script that only sets the method, body
 *   and headers and reports errors: wrk's static path, no Lua per request). This is the load that
 *   reaches a fast server's limit.
 * - **lua**: `requests.lua` builds every request in Lua, cycling through many distinct tokens.
 *   Realistic for a cache, but wrk's own core saturates first on a fast server.
 *
 * @module
 */

/** One wrk run. */
export interface WrkResult {
  /** Successful (2xx/3xx) requests per second. */
  rps: number;
  p50: number;
  p99: number;
  /** Requests completed, errors included. */
  requests: number;
  errors: number;
  /** Wall time of the run in seconds (wrk's start to its exit). */
  seconds: number;
  /** wrk's CPU time over wall time, per wrk thread (1 = every thread busy all the time). */
  generatorShare: number;
}

/** How to generate the load. */
export type Load =
  | { kind: "fixed"; url: string; method?: string; headers?: Record<string, string>; body?: string }
  | { kind: "lua"; url: string; args: string[] };

/** Where and how hard. */
export interface WrkOptions {
  /** A taskset core list for wrk, or undefined to leave it unpinned. */
  cores?: string;
  threads: number;
  connections: number;
  duration: number;
  /** wrk's own per-request timeout (its default: 2 s), for loads that queue longer. */
  timeoutSeconds?: number;
}

const LUA_SCRIPT = new URL("./requests.lua", import.meta.url).pathname;

/** Writes wrk's script for a fixed request into `dir` and returns its path. */
function writeFixedScript(dir: string, load: Extract<Load, { kind: "fixed" }>): string {
  const lua = (s: string) => JSON.stringify(s); // a JSON string is a valid Lua string here
  const lines = [
    `wrk.method = ${lua(load.method ?? "GET")}`,
    ...(load.body === undefined ? [] : [`wrk.body = ${lua(load.body)}`]),
    ...Object.entries(load.headers ?? {}).map(([k, v]) => `wrk.headers[${lua(k)}] = ${lua(v)}`),
    "function done(summary, latency, requests)",
    '  io.write("errors.status ", summary.errors.status, "\\n")',
    '  io.write("errors.connect ", summary.errors.connect, "\\n")',
    '  io.write("errors.timeout ", summary.errors.timeout, "\\n")',
    "end",
  ];
  const path = Deno.makeTempFileSync({ dir, prefix: "fixed-", suffix: ".lua" });
  Deno.writeTextFileSync(path, lines.join("\n") + "\n");
  return path;
}

function toMs(value: string, unit: string): number {
  const n = Number(value);
  return unit === "us" ? n / 1000 : unit === "s" ? n * 1000 : n;
}

/** Parses `times` output: the second line is the children's user and system time. */
function parseChildTimes(text: string): number {
  const lines = text.trim().split("\n");
  const last = lines[lines.length - 1];
  const match = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(last.trim());
  if (!match) return NaN;
  return Number(match[1]) * 60 + Number(match[2]) + Number(match[3]) * 60 + Number(match[4]);
}

/** Runs wrk once; `dir` holds the generated scripts. */
export async function runWrk(load: Load, options: WrkOptions, dir: string): Promise<WrkResult> {
  const script = load.kind === "fixed" ? writeFixedScript(dir, load) : LUA_SCRIPT;
  const wrkArgs = [
    `-t${options.threads}`,
    `-c${options.connections}`,
    `-d${options.duration}s`,
    ...(options.timeoutSeconds === undefined ? [] : [`--timeout`, `${options.timeoutSeconds}s`]),
    "--latency",
    "-s",
    script,
    load.url,
    ...(load.kind === "lua" ? ["--", ...load.args] : []),
  ];
  // The shell runs wrk, then prints its own and its children's CPU times: wrk's exact rusage.
  const shell = ["sh", "-c", 'wrk "$@"; status=$?; times; exit $status', "sh", ...wrkArgs];
  const argv = options.cores === undefined ? shell : ["taskset", "-c", options.cores, ...shell];
  const started = performance.now();
  const output = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
  }).output();
  const seconds = (performance.now() - started) / 1000;
  const text = new TextDecoder().decode(output.stdout);
  if (!output.success) {
    throw new Error(`wrk failed: ${new TextDecoder().decode(output.stderr)}${text}`);
  }
  const latency = (p: string) => {
    const match = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(text);
    return match ? toMs(match[1], match[2]) : NaN;
  };
  const number = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);
  const requests = number(/(\d+) requests in/);
  const statusErrors = number(/errors\.status (\d+)/);
  const measured = number(/requests in ([\d.]+)s/);
  return {
    rps: (requests - statusErrors) / measured,
    p50: latency("50"),
    p99: latency("99"),
    requests,
    errors: statusErrors + number(/errors\.connect (\d+)/) + number(/errors\.timeout (\d+)/),
    seconds,
    // Over wrk's measured interval, not the process's life: start-up work (reading the token
    // list) then counts against wrk, which errs towards calling it saturated.
    generatorShare: parseChildTimes(text) / measured / options.threads,
  };
}
