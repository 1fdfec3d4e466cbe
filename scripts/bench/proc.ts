/**
 * What the benchmark reads about a server from `/proc`: the CPU time and the
 * anonymous resident memory of a process and every process below it (worker
 * processes included; threads are part of their process already); and how it pins a process
 * tree, or the bench's own process, to cores.
 *
 * @module
 */

/** Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`: 100 on Linux). */
const CLOCK_TICKS = 100;

/** The ids of `pid` and of every process below it, read from `/proc/<pid>/task/<tid>/children`. */
export function listProcessTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    let tasks: Deno.DirEntry[] = [];
    try {
      tasks = [...Deno.readDirSync(`/proc/${tree[i]}/task`)];
    } catch {
      continue; // exited meanwhile
    }
    for (const task of tasks) {
      try {
        const children = Deno.readTextFileSync(`/proc/${tree[i]}/task/${task.name}/children`);
        for (const child of children.split(" ")) if (child.trim()) tree.push(Number(child));
      } catch { /* the thread ended meanwhile */ }
    }
  }
  return tree;
}

/** User plus system CPU seconds of one process (all its threads), or 0 once it is gone. */
export function readProcessCpuSeconds(pid: number): number {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of stat(5); fields[0] here is field 3.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** CPU seconds used so far by `pid` and every process below it. */
export function readTreeCpuSeconds(pid: number): number {
  return listProcessTree(pid).reduce((sum, id) => sum + readProcessCpuSeconds(id), 0);
}

/** Anonymous resident memory (no mapped files) of one process in MiB, or undefined. */
export function readProcessRssMiB(pid: number): number | undefined {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const kb = Number(/RssAnon:\s+(\d+) kB/.exec(status)?.[1]);
    return Number.isFinite(kb) ? kb / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Anonymous resident memory of `pid` and every process below it, in MiB. */
export function readTreeRssMiB(pid: number): number | undefined {
  let total: number | undefined;
  for (const id of listProcessTree(pid)) {
    const rss = readProcessRssMiB(id);
    if (rss !== undefined) total = (total ?? 0) + rss;
  }
  return total;
}

/** Pins `pid` and every thread and child below it to `cores`; false when not possible. */
export async function pinTree(pid: number, cores: string | undefined): Promise<boolean> {
  if (cores === undefined) return false;
  let pinned = true;
  for (const id of listProcessTree(pid)) {
    const output = await new Deno.Command("taskset", {
      args: ["-a", "-p", "-c", cores, String(id)],
      stdout: "null",
      stderr: "null",
    }).output();
    pinned &&= output.success;
  }
  return pinned;
}

/**
 * Pins the bench's own process (all its threads, not its children) to `cores`, so that what it
 * drives besides wrk (revokers, probes, logins) and what it starts unpinned (PostgreSQL, the admin
 * CLI) stay off the measured server's core. Resolves to a function that restores the affinity it
 * had; undefined when nothing was pinned.
 */
export async function pinSelf(
  cores: string | undefined,
): Promise<(() => Promise<void>) | undefined> {
  if (cores === undefined) return undefined;
  const taskset = (args: string[]) =>
    new Deno.Command("taskset", { args, stdout: "piped", stderr: "null" }).output();
  const before = await taskset(["-p", String(Deno.pid)]);
  const mask = /:\s*([0-9a-f,]+)\s*$/i.exec(new TextDecoder().decode(before.stdout))?.[1];
  if (!before.success || mask === undefined) return undefined;
  if (!(await taskset(["-a", "-p", "-c", cores, String(Deno.pid)])).success) return undefined;
  return async () => {
    await taskset(["-a", "-p", mask, String(Deno.pid)]);
  };
}

/** The machine's busy and total clock ticks so far, over every core (`/proc/stat`'s `cpu` line). */
function readMachineTicks(): { busy: number; total: number } {
  const fields = Deno.readTextFileSync("/proc/stat").split("\n")[0].trim().split(/\s+/).slice(1)
    .map(Number);
  const total = fields.reduce((sum, n) => sum + n, 0);
  // idle and iowait are the fourth and fifth fields.
  return { busy: total - fields[3] - fields[4], total };
}

/** What {@link waitForQuiet} saw: the seconds it waited, and whether the machine went quiet. */
export interface QuietWait {
  seconds: number;
  quiet: boolean;
  /** The last second's busy share of the whole machine (0 to 1). */
  busy: number;
}

/**
 * Waits until the whole machine has been quiet for a second (busy under `threshold` of all its
 * cores), or `timeoutSeconds` have passed: work that servers and the database start on their own
 * (a freshly started server's janitor sweep, autovacuum, a checkpoint) then
 * does not fall into a measured run.
 */
export async function waitForQuiet({
  threshold = 0.1,
  timeoutSeconds = 180,
  readTicks = readMachineTicks,
  sleepSecond = () => new Promise<void>((resolve) => setTimeout(resolve, 1000)),
}: {
  threshold?: number;
  timeoutSeconds?: number;
  /** The machine's ticks (tests give their own). */
  readTicks?: () => { busy: number; total: number };
  /** Waits a second (tests give their own). */
  sleepSecond?: () => Promise<void>;
} = {}): Promise<QuietWait> {
  let seconds = 0;
  let before = readTicks();
  for (;;) {
    await sleepSecond();
    seconds++;
    const after = readTicks();
    const busy = (after.busy - before.busy) / Math.max(1, after.total - before.total);
    if (busy < threshold) return { seconds, quiet: true, busy };
    if (seconds >= timeoutSeconds) return { seconds, quiet: false, busy };
    before = after;
  }
}
