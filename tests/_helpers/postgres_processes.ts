/**
 * The processes behind a test PostgreSQL cluster: running its programs (as the `postgres` user
 * when we are root), free ports, the watchdog that removes a crashed test's cluster, and waits
 * for the server's port and a synchronous standby.
 */
import postgres from "postgres";

export const IS_ROOT = Deno.uid() === 0;

/** Runs a PostgreSQL program, as the `postgres` user when we are root. */
export async function run(program: string, args: string[]): Promise<string> {
  const [command, fullArgs] = IS_ROOT
    ? ["runuser", ["-u", "postgres", "--", program, ...args]]
    : [program, args];
  const output = await new Deno.Command(command, {
    args: fullArgs,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { LC_ALL: "C" },
  }).output();
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  if (!output.success) throw new Error(`${program} ${args.join(" ")} failed:\n${text}`);
  return text;
}

export function runSync(program: string, args: string[]): void {
  const [command, fullArgs] = IS_ROOT
    ? ["runuser", ["-u", "postgres", "--", program, ...args]]
    : [program, args];
  new Deno.Command(command, { args: fullArgs, stdin: "null", stdout: "null", stderr: "null" })
    .outputSync();
}

/**
 * A detached shell that waits for this process to end, then stops the
 * cluster and removes its directories: a test process that crashes (or a
 * shared cluster's process that exits) leaves nothing behind. Started
 * through a shell that exits at once, so no test holds its handle.
 */
export async function startWatchdog(bin: string, dirs: string[], data: string): Promise<void> {
  const stopCommand = IS_ROOT
    ? `runuser -u postgres -- '${bin}/pg_ctl' --pgdata '${data}' --mode immediate stop`
    : `'${bin}/pg_ctl' --pgdata '${data}' --mode immediate stop`;
  const script = `while kill -0 ${Deno.pid} 2>/dev/null; do sleep 1; done; ` +
    `if [ -d '${data}' ]; then ${stopCommand}; fi; rm -rf ${dirs.map((d) => `'${d}'`).join(" ")}`;
  await new Deno.Command("sh", {
    args: ["-c", `nohup sh -c "${script}" >/dev/null 2>&1 &`],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).output();
}

export async function waitForPort(path: string): Promise<number> {
  for (let waited = 0; waited < 60_000; waited += 50) {
    try {
      return Number(await Deno.readTextFile(path));
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error("The shared PostgreSQL cluster did not start within 60 s");
}

/**
 * Makes the server at `url` wait for any standby on every commit, and waits until one is
 * connected as synchronous.
 */
export async function waitForSynchronousStandby(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`ALTER SYSTEM SET synchronous_standby_names = '*'`;
    await sql`SELECT pg_reload_conf()`;
    for (let waited = 0;; waited += 20) {
      const rows = await sql`SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'`;
      if (rows.length > 0) return;
      if (waited > 30_000) throw new Error("No synchronous standby within 30 s");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await sql.end();
  }
}

export function postgresIds(): { uid: number; gid: number } {
  const line = Deno.readTextFileSync("/etc/passwd").split("\n")
    .find((entry) => entry.startsWith("postgres:"));
  if (line === undefined) throw new Error('No "postgres" user to run PostgreSQL as');
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}
