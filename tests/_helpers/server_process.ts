/**
 * The real server as a child process on port 0, for process-level tests:
 * its log lines, its URLs and a SIGTERM stop.
 */
import { main as admin } from "../../src/cli/main.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { REPO, withoutTaskLine } from "./task.ts";

export interface ServerProcess {
  /** `https://127.0.0.1:PORT` (or `http://` behind a proxy). */
  origin: string;
  /** `http://127.0.0.1:PORT/metrics` when metrics are on. */
  metricsUrl?: string;
  /** `https://127.0.0.1:PORT` of the admin listener when it is on. */
  adminOrigin?: string;
  child: Deno.ChildProcess;
  /** Standard output so far, one log line each. */
  lines: string[];
  /** Standard error so far (Deno's own warnings land here), one line each. */
  errors: string[];
  /** Sends SIGTERM and waits for the exit. */
  stop(): Promise<Deno.CommandStatus>;
  /** Waits for the exit without a signal. */
  exited(): Promise<Deno.CommandStatus>;
}

/** `--store` for a `postgres://` URL, `--db` for a SQLite path. */
function storeFlag(location: string): string {
  return /^postgres(ql)?:\/\//.test(location) ? "--store" : "--db";
}

/** Options of {@link startServerProcess}. */
export interface ServerProcessOptions {
  /**
   * Run `deno task start ARGS` in the repository, as an operator types it (deno.json's flags),
   * instead of `deno run` with the test's own permissions.
   */
  task?: boolean;
  /** Pass the store in the environment (`KEYGATE_STORE` or `KEYGATE_DB`), not as a flag. */
  storeInEnv?: boolean;
  /** Added to the environment. */
  env?: Record<string, string>;
  /** No `--port 0`: the arguments or the environment give the port. */
  ownPort?: boolean;
  /**
   * The command before the server's arguments, program first (default: `deno run` with the
   * test's permissions, or `deno task start` with `task`).
   */
  command?: string[];
  /** The working directory (default: this process's; the repository with `task`). */
  cwd?: string;
  /** Wait for the admin listener too (implied by `--admin` in the arguments). */
  admin?: boolean;
}

/**
 * Starts `main.ts` on 127.0.0.1, port 0, and waits for its "listening" line. An empty `dbPath`
 * passes neither `--db` nor `--store` (the environment names the store).
 */
export async function startServerProcess(
  dbPath: string,
  extraArgs: string[] = [],
  options: ServerProcessOptions = {},
): Promise<ServerProcess> {
  const storeEnv: Record<string, string> = options.storeInEnv && dbPath !== ""
    ? { [storeFlag(dbPath) === "--store" ? "KEYGATE_STORE" : "KEYGATE_DB"]: dbPath }
    : {};
  const serverArgs = [
    ...(options.ownPort ? [] : ["--port", "0"]),
    ...(dbPath === "" || options.storeInEnv ? [] : [storeFlag(dbPath), dbPath]),
    ...(extraArgs.includes("--hostname") ? [] : ["--hostname", "127.0.0.1"]),
    ...extraArgs,
  ];
  const [program, ...args] = options.command ?? [
    Deno.execPath(),
    ...(options.task ? ["task", "start"] : [
      "run",
      "--allow-net",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-ffi",
      "--allow-sys",
      "main.ts",
    ]),
  ];
  const cwd = options.cwd ?? (options.task ? REPO : undefined);
  const child = new Deno.Command(program, {
    args: [...args, ...serverArgs],
    ...(cwd === undefined ? {} : { cwd }),
    env: { NO_COLOR: "1", ...storeEnv, ...options.env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const errors: string[] = [];
  const stderrDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({
      write(chunk) {
        errors.push(...withoutTaskLine(chunk, "start").split("\n").filter(Boolean));
      },
    }),
  );
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  let origin: string | undefined;
  let metricsUrl: string | undefined;
  let adminOrigin: string | undefined;
  const wantMetrics = extraArgs.includes("--metrics");
  const wantAdmin = extraArgs.includes("--admin") || options.admin === true;
  while (
    origin === undefined || (wantMetrics && metricsUrl === undefined) ||
    (wantAdmin && adminOrigin === undefined)
  ) {
    const { value, done } = await reader.read();
    if (done) {
      await stderrDone;
      throw new Error(`server exited before listening: ${[...lines, ...errors].join("\n")}`);
    }
    buffered += value;
    const parts = buffered.split("\n");
    buffered = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      origin ??= /keygate listening on (https?:\/\/[^/]+)\//.exec(line)?.[1];
      metricsUrl ??= /metrics on (http:\/\/[^"]+\/metrics)/.exec(line)?.[1];
      adminOrigin ??= /admin API and console on (https:\/\/[^/]+)\//.exec(line)?.[1];
    }
  }
  const drained = (async () => {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += value;
      const parts = buffered.split("\n");
      buffered = parts.pop()!;
      lines.push(...parts.filter(Boolean));
    }
  })();
  const exited = async () => {
    const status = await child.status;
    await drained;
    await stderrDone;
    return status;
  };
  return {
    origin: origin.replace("localhost", "127.0.0.1"),
    metricsUrl,
    adminOrigin,
    child,
    lines,
    errors,
    exited,
    stop() {
      child.kill("SIGTERM");
      return exited();
    },
  };
}

const hasher = createPasswordHasher();

/** Adds a user with `password` and returns a new API key for it, through the admin CLI. */
export async function addUserWithKey(
  dbPath: string,
  email: string,
  password: string,
): Promise<string> {
  const out: string[] = [];
  const io = {
    env: {},
    stdout: (text: string) => out.push(text),
    stderr: (text: string) => out.push(text),
    readPassword: () => Promise.resolve(password),
    hasher,
  };
  const where = [storeFlag(dbPath), dbPath];
  if (await admin(["user", "add", email, ...where], io) !== 0) throw new Error(out.join());
  if (await admin(["key", "create", email, ...where], io) !== 0) throw new Error(out.join());
  return out.at(-1)!;
}
