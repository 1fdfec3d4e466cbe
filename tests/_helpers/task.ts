/**
 * The repository's `deno task`s run as an operator types them: `deno task
 * NAME ARGS` as a child process, in the repository, so that deno.json's
 * permissions and flags are the ones tested (a test that runs `deno run` with
 * its own flags would miss a flag the task lacks).
 */

/** The repository's root, where deno.json is. */
export const REPO = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** What a task printed, and its exit code. */
export interface TaskRun {
  code: number;
  out: string;
  /** Standard error without deno's own `Task NAME …` line. */
  err: string;
}

/** Options of {@link runTask}. */
export interface TaskOptions {
  /** Standard input (a password's line, say). Default: empty. */
  stdin?: string;
  /** Added to (and overriding) this process's environment. */
  env?: Record<string, string>;
  /**
   * After this long the task is stopped (SIGTERM) and its run ends with exit code 124, as with
   * timeout(1): a command that should refuse at once but serves fails instead of hanging.
   * Default 60 s.
   */
  timeoutMs?: number;
}

/** Runs `deno task NAME ARGS` in the repository and waits for it. */
export async function runTask(
  name: string,
  args: readonly string[],
  options: TaskOptions = {},
): Promise<TaskRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", name, ...args],
    cwd: REPO,
    env: { NO_COLOR: "1", ...options.env },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGTERM");
  }, options.timeoutMs ?? 60_000);
  try {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(options.stdin ?? ""));
    await writer.close();
    const output = await child.output();
    const err = withoutTaskLine(new TextDecoder().decode(output.stderr), name);
    return {
      code: timedOut ? 124 : output.code,
      out: new TextDecoder().decode(output.stdout),
      err: timedOut ? `${err}(stopped after ${options.timeoutMs ?? 60_000} ms)\n` : err,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Standard error without the line deno prints before running a task. */
export function withoutTaskLine(text: string, name: string): string {
  return text.split("\n").filter((line) => !line.startsWith(`Task ${name} `)).join("\n");
}

/**
 * The command line of a task from deno.json, as `deno run` arguments with the
 * script's path made absolute and `--config` added: how the task's own flags
 * run from another working directory (as the compiled binary does under
 * systemd, from `/`), since `deno task` always runs in the repository.
 */
export function taskAsDenoRun(name: string): string[] {
  const config = JSON.parse(Deno.readTextFileSync(`${REPO}/deno.json`));
  const words = String(config.tasks[name]).split(/\s+/);
  if (words[0] !== "deno" || words[1] !== "run") throw new Error(`task ${name} is not deno run`);
  const rest = words.slice(2);
  const script = rest.findIndex((word) => !word.startsWith("-"));
  rest[script] = `${REPO}/${rest[script]}`;
  return ["run", "--config", `${REPO}/deno.json`, ...rest];
}

/** The repository's ./db/: its entries and their modification times (or absent). */
export function snapshotDb(): string {
  try {
    return [...Deno.readDirSync(`${REPO}/db`)]
      .map((entry) => `${entry.name} ${Deno.statSync(`${REPO}/db/${entry.name}`).mtime?.getTime()}`)
      .sort().join("\n");
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "(absent)";
    throw error;
  }
}
