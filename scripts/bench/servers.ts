/**
 * Starts and stops the benchmark's servers, and reads their CPU time and
 * memory from `/proc` (the whole process tree, so worker processes count).
 *
 * @module
 */
import { readTreeCpuSeconds, readTreeRssMiB } from "./proc.ts";

/** A running server under test. */
export interface Server {
  name: string;
  origin: string;
  pid: number;
  /** CPU seconds the server (all its threads and child processes) has used so far. */
  readCpuSeconds(): number;
  /** Anonymous resident memory of the server's process tree in MiB. */
  readRssMiB(): number | undefined;
  stop(): Promise<void>;
}

/** Prefixes `argv` with `taskset -c cores` when `cores` is given. */
export function pinTo(cores: string | undefined, argv: string[]): string[] {
  return cores === undefined ? argv : ["taskset", "-c", cores, ...argv];
}

/**
 * Starts `argv` with its output in `dir/name.log` and waits until the log shows the port.
 * `sh -c exec` (and taskset, which execs too) keep the server's pid the child's pid.
 */
export async function startServer(
  dir: string,
  name: string,
  argv: string[],
  portPattern: RegExp,
): Promise<Server> {
  const logFile = `${dir}/${name}.log`;
  const quoted = argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  const child = new Deno.Command("sh", {
    args: ["-c", `exec ${quoted} > '${logFile}' 2>&1`],
    stdin: "null",
  }).spawn();
  let exited = false;
  child.status.then(() => exited = true);
  for (let i = 0; i < 1200 && !exited; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    let text = "";
    try {
      text = await Deno.readTextFile(logFile);
    } catch { /* not yet */ }
    const port = portPattern.exec(text)?.[1];
    if (port) {
      return {
        name,
        origin: `https://127.0.0.1:${port}`,
        pid: child.pid,
        readCpuSeconds: () => readTreeCpuSeconds(child.pid),
        readRssMiB: () => readTreeRssMiB(child.pid),
        async stop() {
          if (!exited) child.kill("SIGTERM");
          await child.status;
        },
      };
    }
  }
  if (!exited) child.kill("SIGKILL");
  await child.status;
  throw new Error(`${name} did not start: ${await Deno.readTextFile(logFile).catch(() => "")}`);
}
