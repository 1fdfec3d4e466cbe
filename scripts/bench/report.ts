/**
 * Formats the benchmark's tables and writes them into docs/performance.md,
 * between the markers `<!-- bench:begin -->` and `<!-- bench:end -->`, so
 * that the hand-written methodology around them stays.
 *
 * @module
 */
import type { WrkResult } from "./wrk.ts";

/**
 * wrk's CPU share (per thread) at or above which a run measured the load generator rather than
 * the server, and the benchmark prints no ratio with it. wrk runs one thread per core; a thread
 * busy 90% of the time has no room left to send the requests a faster server would answer, so
 * a rate measured there is a floor for the server, not its limit. Below it, wrk spent at least
 * a tenth of the run waiting for the server.
 */
export const GENERATOR_LIMIT = 0.9;

/** A wrk run plus what the server spent on it. */
export interface Measured extends WrkResult {
  /** Server CPU time per request completed, in µs (all threads and worker processes). */
  cpuUsPerRequest: number;
  /** Server CPU time over wall time: how many cores the server kept busy. */
  serverCores: number;
  /** A separate database server's CPU time per request, in µs (PostgreSQL's processes). */
  dbCpuUsPerRequest?: number;
}

const pct = (share: number) => `${Math.round(share * 100)}%`;

/** Why `a` cannot be compared with `b`, or undefined when both runs are valid. */
export function findInvalidRun(...runs: Measured[]): string | undefined {
  for (const run of runs) {
    if (!(run.generatorShare < GENERATOR_LIMIT)) {
      return `no ratio: wrk at ${pct(run.generatorShare)} of its core`;
    }
    if (run.errors > 0) return `no ratio: ${run.errors} errors`;
  }
  return undefined;
}

/** `a`'s rate over `b`'s, or the reason it is not printed. */
export function formatRatio(a: Measured, b: Measured, unit = ""): string {
  return findInvalidRun(a, b) ?? `${(a.rps / b.rps).toFixed(2)}${unit}`;
}

/**
 * `base`'s server CPU per request over `run`'s: the rate ratio the two servers would reach when
 * each is held at its limit by a fast enough generator, since a server held at its limit on one
 * core serves 10⁶ / (µs per request) requests per second. It needs no unsaturated wrk, only
 * runs without errors.
 */
export function formatCpuRatio(base: Measured, run: Measured): string {
  if (base.errors > 0 || run.errors > 0) return "no ratio: errors";
  return (base.cpuUsPerRequest / run.cpuUsPerRequest).toFixed(2);
}

/** One line of a results table. */
export interface Row {
  scenario: string;
  server: string;
  load: string;
  result: Measured;
  rssMiB?: number;
  /** Further columns, by header. */
  extra?: Record<string, string>;
}

const fixed = (n: number, digits: number) => Number.isFinite(n) ? n.toFixed(digits) : "";

/**
 * `rows` as a Markdown list, one item per run with its figures nested under it: the docs keep
 * every line within 100 characters, which a table of this many columns cannot.
 */
export function formatRows(rows: Row[], extraHeaders: string[] = []): string {
  return rows.map((r) => {
    const { result } = r;
    const server = [
      `${fixed(result.cpuUsPerRequest, 1)} µs CPU per request`,
      `${fixed(result.serverCores, 2)} cores busy`,
      ...(r.rssMiB === undefined ? [] : [`RSS ${r.rssMiB.toFixed(1)} MiB`]),
    ];
    const lines = [
      `- ${r.scenario}; ${r.server}; ${r.load}: **${fixed(result.rps, 0)} req/s**`,
      `  - latency: p50 ${fixed(result.p50, 2)} ms, p99 ${fixed(result.p99, 2)} ms`,
      `  - server: ${server.join(", ")}`,
      ...(result.dbCpuUsPerRequest === undefined ? [] : [
        `  - database: ${fixed(result.dbCpuUsPerRequest, 1)} µs CPU per request; keygate and ` +
        `database together ${fixed(result.cpuUsPerRequest + result.dbCpuUsPerRequest, 1)} µs`,
      ]),
      `  - wrk: ${pct(result.generatorShare)} of its core${
        result.errors > 0 ? `; ${result.errors} errors` : ""
      }`,
      ...extraHeaders.filter((h) => r.extra?.[h]).map((h) => `  - ${h}: ${r.extra![h]}`),
    ];
    return lines.join("\n");
  }).join("\n");
}

/**
 * Wraps Markdown prose and list items at `width` characters (continuation lines indented under
 * their item); headings, markers and table rows are left as they are.
 */
export function wrapMarkdown(text: string, width = 100): string {
  return text.split("\n").flatMap((line) => {
    if (line.length <= width || /^\s*(#|<!--|\|)/.test(line)) return [line];
    const item = /^(\s*)(- )?/.exec(line)!;
    const indent = item[1] + (item[2] === undefined ? "" : "  ");
    const out: string[] = [];
    let current = "";
    for (const word of line.trimStart().split(" ")) {
      const start = out.length === 0 && current === "" ? item[1] : indent;
      if (current !== "" && (current + " " + word).length > width) {
        out.push(current);
        current = indent + word;
      } else {
        current = current === "" ? start + word : `${current} ${word}`;
      }
    }
    if (current !== "") out.push(current);
    return out;
  }).join("\n");
}

/**
 * The other layout's marker: everything after it is the bench's. Honoured when the begin and end
 * markers are absent, so that either layout of docs/performance.md keeps its prose.
 */
const TAIL_MARKER = "<!-- Written by deno task bench from here on; edit only the text above. -->";

/** Replaces the text between the bench markers of `path` with `body` (or writes a new file). */
export async function writeResults(path: string, body: string): Promise<void> {
  const begin = "<!-- bench:begin -->";
  const end = "<!-- bench:end -->";
  let text = "";
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const from = text.indexOf(begin);
  const to = text.indexOf(end);
  const block = `${begin}\n${body.trim()}\n${end}`;
  const tail = text.indexOf(TAIL_MARKER);
  const next = from >= 0 && to > from
    ? text.slice(0, from) + block + text.slice(to + end.length)
    : tail >= 0
    ? `${text.slice(0, tail + TAIL_MARKER.length)}\n\n## Measurements\n\n${block}\n`
    : `# Performance\n\n${block}\n`;
  await Deno.writeTextFile(path, next);
}

/** One section of the report, as a section of the bench returns it. */
export interface SectionRows {
  title: string;
  intro?: string;
  rows: Row[];
  columns: string[];
  after?: string;
}

/** What the report's header says about the run. */
export interface RunDescription {
  /** The command that reproduces the run. */
  command: string;
  connections: number;
  duration: number;
  rounds: number;
  taskset: boolean;
}

/**
 * The whole report: the run and the machine, each section's heading, prose and rows, and the
 * notes (each run with errors gets one), wrapped at 100 characters.
 */
export async function formatReport(
  run: RunDescription,
  sections: SectionRows[],
  notes: string[],
): Promise<string> {
  const cpu = (await Deno.readTextFile("/proc/cpuinfo").catch(() => "")).match(
    /model name\s*:\s*(.*)/,
  )?.[1] ?? "unknown";
  const wrkVersion = new TextDecoder().decode(
    (await new Deno.Command("wrk", { args: ["--version"], stdout: "piped", stderr: "piped" })
      .output()).stdout,
  ).split("\n")[0];
  const errors = sections.flatMap((section) => section.rows).filter((row) =>
    findInvalidRun(row.result) !== undefined && row.result.errors > 0
  ).map((row) => `${row.scenario} (${row.server}, ${row.load}): ${row.result.errors} errors.`);
  const body = sections.map((section) =>
    [
      `### ${section.title}`,
      section.intro,
      formatRows(section.rows, section.columns),
      section.after,
    ].filter((part) => part !== undefined).join("\n\n")
  ).join("\n\n");
  return wrapMarkdown(
    `Recorded by \`${run.command}\` on ${new Date().toISOString().slice(0, 10)}.

- Machine: ${navigator.hardwareConcurrency} cores (${cpu}), ${
      Math.round(Deno.systemMemoryInfo().total / 2 ** 30)
    } GiB; Deno ${Deno.version.deno}, V8 ${Deno.version.v8}; ${wrkVersion}
- Servers pinned to core 0${
      run.taskset ? "" : " (taskset missing: nothing pinned)"
    }, wrk (one thread) to core 1, except under "Using every core"; HTTPS, HTTP/1.1 keep-alive, ${run.connections} connections, ${run.duration} s per run; side-by-side rows are the median of ${run.rounds} alternating rounds
- No ratio is printed where wrk was at ${
      Math.round(GENERATOR_LIMIT * 100)
    }% or more of its core (per wrk thread), or where a run had errors

${body}

${[...notes, ...errors].map((n) => `- ${n}`).join("\n")}
`,
  );
}
