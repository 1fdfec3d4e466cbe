/**
 * keygate's admin CLI: users, API keys and tokens in the store. Strict: an
 * unknown command, option or extra argument is a usage error (exit 2); a
 * group without a subcommand lists its subcommands; `--help`/`-h` and
 * `--version` work everywhere. Commands that need an existing database never
 * create one.
 *
 * Usage: `deno task admin help`
 *
 * @module
 */
import { toCliActor } from "../auth/audit.ts";
import type { ChangeDeps } from "../auth/changes.ts";
import { AuthError } from "../auth/errors.ts";
import { systemClock } from "../platform/clock.ts";
import { toPrintable } from "../formats/printable.ts";
import { createLogger, type LogFields, toErrorText } from "../platform/logger.ts";
import { createPasswordHasher } from "../passwords/passwords.ts";
import { StoreError } from "../store/errors.ts";
import type { OpenedStore } from "../store/open_store.ts";
import type { Store } from "../store/store.ts";
import type { Command, CommandContext } from "./command.ts";
import { parseCommandLine } from "./command_line.ts";
import { type CommandStore, findCommandStore } from "./command_store.ts";
import { AdminError, type AdminIO, oneLine, readPasswordFromStdin } from "./io.ts";

export { AdminError, type AdminIO, readPasswordFromStdin } from "./io.ts";

/** Runs one admin command; resolves to the exit code (0 done, 1 failed, 2 usage error). */
export async function main(args: string[], overrides: Partial<AdminIO> = {}): Promise<number> {
  const io: AdminIO = {
    env: overrides.env ?? Deno.env.toObject(),
    stdout: printable(overrides.stdout ?? ((text) => console.log(text))),
    stderr: printable(overrides.stderr ?? ((text) => console.error(text))),
    readPassword: overrides.readPassword ?? readPasswordFromStdin,
    clock: overrides.clock ?? systemClock,
    hasher: overrides.hasher ?? createLazyHasher(),
  };
  let opened: OpenedStore | undefined;
  try {
    const line = parseCommandLine(args);
    if (line.kind === "print") {
      io.stdout(line.text);
      return 0;
    }
    const { command, options } = line;
    const where = findCommandStore(command, { values: line.values, io });
    const writeLog = overrides.audit ?? (options.log !== undefined ? io.stderr : undefined);
    const log = createChangeLog(command, { writeLog, io, dbPath: where.dbPath });
    if (command.database !== "path") opened = await where.open();
    const context: CommandContext = {
      get store() {
        if (opened === undefined) throw new Error("The store is not open yet");
        return opened.store;
      },
      get maintenance() {
        return opened?.maintenance;
      },
      get postgres() {
        return opened?.postgres;
      },
      async openStore() {
        opened ??= await where.open();
        return opened.store;
      },
      get changes() {
        return toChangeDeps(context.store, { io, log });
      },
      dbPath: where.dbPath,
      args: line.args,
      options,
      io,
      log,
    };
    await command.run(context);
    return 0;
  } catch (error) {
    io.stderr(`keygate admin: ${toErrorLine(error)}`);
    return toExitCode(error);
  } finally {
    await opened?.store.closeStore();
    if (overrides.hasher === undefined) io.hasher.close();
  }
}

/** `--log`'s JSON lines, one per change, naming the command, the actor and the store. */
function createChangeLog(
  command: Command,
  { writeLog, io, dbPath }: {
    writeLog: ((line: string) => void) | undefined;
    io: AdminIO;
    dbPath: CommandStore["dbPath"];
  },
): (fields: LogFields) => void {
  const changeLog = writeLog === undefined
    ? undefined
    : createLogger({ level: "info", write: writeLog, clock: io.clock });
  const name = command.words.join(" ");
  return (fields: LogFields) =>
    changeLog?.info("admin change", {
      event: "admin_change",
      command: name,
      actor: toCliActor(io.env),
      db: dbPath,
      ...fields,
    });
}

/** What the domain's change functions need: the store, the clock, the CLI's actor, the log. */
function toChangeDeps(
  store: Store,
  { io, log }: { io: AdminIO; log: (fields: LogFields) => void },
): ChangeDeps {
  return {
    store,
    clock: io.clock,
    actor: toCliActor(io.env),
    noteChange: (entry) => log({ action: entry.action, subject: entry.subject, ...entry.detail }),
  };
}

/** The one line a failure prints after `keygate admin: `. */
function toErrorLine(error: unknown): string {
  if (error instanceof AdminError || error instanceof AuthError) return error.message;
  if (error instanceof StoreError) return oneLine(error.message);
  return oneLine(toErrorText(error));
}

/** 2 for a usage error (or a value the domain refused), 1 for any other failure. */
function toExitCode(error: unknown): number {
  if (error instanceof AdminError) return error.exitCode;
  // The domain refused: a bad value is a usage error, the rest (not found, conflict) not.
  if (error instanceof AuthError) return error.code === "invalid_request" ? 2 : 1;
  return 1;
}

/** The password hasher, started only when a command hashes (its workers take a moment). */
function createLazyHasher(): AdminIO["hasher"] {
  let hasher: ReturnType<typeof createPasswordHasher> | undefined;
  const get = () => hasher ??= createPasswordHasher({ workers: 1 });
  return {
    hash: (password) => get().hash(password),
    verify: (hash, password, signal) => get().verify(hash, password, signal),
    close: () => hasher?.close(),
  } as AdminIO["hasher"];
}

/** Every line the CLI prints goes through {@link toPrintable}. */
function printable(write: (text: string) => void): (text: string) => void {
  return (text) => write(toPrintable(text));
}

if (import.meta.main) Deno.exit(await main(Deno.args));
