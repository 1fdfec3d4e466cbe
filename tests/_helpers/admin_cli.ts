/**
 * The admin CLI run in-process for tests: on a database file, with a fake
 * clock, a password on "standard input", and its output captured.
 */
import { main } from "../../src/cli/main.ts";
import type { Clock } from "../../src/platform/clock.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { createFakeClock } from "./fake_clock.ts";
import { afterExternalWrite } from "./store.ts";
import { runTask } from "./task.ts";

const hasher = createPasswordHasher();

/** What one CLI run printed, and its exit code. */
export interface AdminRun {
  code: number;
  out: string;
  err: string;
  /** The last line of standard output (a new key is printed alone there). */
  lastLine: string;
}

/** Options of {@link runAdmin}. */
export interface AdminRunOptions {
  /** The first line of standard input. Default `"s3cret pw"`. */
  password?: string;
  /** The environment the CLI sees (its actor comes from `USER` or `LOGNAME`). Default `{}`. */
  env?: Record<string, string>;
  /** Default: a fresh fake clock. */
  clock?: Clock;
}

/** Runs `deno task admin ARGS --db DB_PATH` (or `--store URL`) in-process. */
export async function runAdmin(
  dbPath: string,
  args: string[],
  options: AdminRunOptions = {},
): Promise<AdminRun> {
  const out: string[] = [];
  const err: string[] = [];
  // A postgres:// location (KEYGATE_TEST_STORE=postgres) goes in --store; --db is SQLite's.
  const where = /^postgres(ql)?:\/\//.test(dbPath) ? "--store" : "--db";
  const code = await main([...args, where, dbPath], {
    env: options.env ?? {},
    stdout: (text) => out.push(text),
    stderr: (text) => err.push(text),
    readPassword: () => Promise.resolve(options.password ?? "s3cret pw"),
    clock: options.clock ?? createFakeClock(),
    hasher,
  });
  // Another process wrote: a PostgreSQL server learns of it within milliseconds (notification);
  // the tests' next request comes sooner, so the app's store re-reads the epoch now.
  await afterExternalWrite(dbPath);
  return { code, out: out.join("\n"), err: err.join("\n"), lastLine: out.at(-1) ?? "" };
}

/** What the CLI printed as a process, and its exit code. */
export interface AdminProcessRun {
  code: number;
  out: string;
  err: string;
}

/**
 * Runs `deno task admin ARGS --db PATH` (`--store URL` for a `postgres://` location) as a child
 * process in the repository, as an operator types it (deno.json's permissions, not the test's),
 * with `stdin` on its standard input and `USER=ops` (no `--db` when `dbPath` is undefined).
 */
export async function runAdminProcess(
  dbPath: string | undefined,
  args: string[],
  stdin = "",
  env: Record<string, string> = {},
): Promise<AdminProcessRun> {
  const where = dbPath === undefined
    ? []
    : [/^postgres(ql)?:\/\//.test(dbPath) ? "--store" : "--db", dbPath];
  return await runTask("admin", [...args, ...where], { stdin, env: { USER: "ops", ...env } });
}
