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
import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { toCliActor } from "../auth/audit.ts";
import type { ChangeDeps } from "../auth/changes.ts";
import { AuthError } from "../auth/errors.ts";
import { systemClock } from "../platform/clock.ts";
import { type OptionSpec, parseArguments } from "../config/args.ts";
import { VERSION } from "../config/version.ts";
import { toPrintable } from "../formats/printable.ts";
import { createLogger, type LogFields } from "../platform/logger.ts";
import { createPasswordHasher } from "../passwords/passwords.ts";
import { StoreError } from "../store/errors.ts";
import { openStore } from "../store/open_store.ts";
import { parseBoolean } from "../config/parsers.ts";
import {
  checkDatabasePath,
  parseStoreUrl,
  redactCredentials,
  type StoreLocation,
} from "../store/store_url.ts";
import { explainPostgresOpenError } from "../store/postgres/explain_open.ts";
import { describeSource, showValue } from "../config/read_config.ts";
import type { Store } from "../store/store.ts";
import type { Command, CommandContext } from "./command.ts";
import { COMMANDS, GROUPS } from "./commands.ts";
import {
  formatCommand,
  formatGroup,
  formatOverview,
  formatUsage,
  GLOBAL_OPTIONS,
  PROGRAM,
} from "./help.ts";
import { AdminError, type AdminIO, readPasswordFromStdin } from "./io.ts";

export { AdminError, type AdminIO, readPasswordFromStdin } from "./io.ts";

const DEFAULT_DB = "db/keygate.sqlite3";

const PASSWORD_ARGUMENT = "passwords are read from standard input, never from arguments " +
  "(they would stay in shell history)";

/** Every option any command takes, for the first pass that finds the command words. */
const ALL_OPTIONS: readonly OptionSpec[] = (() => {
  const specs = new Map<string, OptionSpec>();
  for (const option of [...GLOBAL_OPTIONS, ...COMMANDS.flatMap((c) => c.options)]) {
    const spec: OptionSpec = {
      name: option.name,
      kind: option.kind,
      ...(option.name === "help" ? { short: "h" } : {}),
    };
    const known = specs.get(option.name);
    if (known !== undefined && known.kind !== spec.kind) {
      throw new Error(`Option --${option.name} is a value in one command and a flag in another`);
    }
    specs.set(option.name, spec);
  }
  return [...specs.values()];
})();

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
  let store: Store | undefined;
  try {
    let parsed;
    try {
      parsed = parseArguments(args, ALL_OPTIONS, { positionals: true });
    } catch (error) {
      throw new AdminError(`${(error as Error).message} (see ${PROGRAM} help)`, 2);
    }
    const { values, positionals } = parsed;
    if (values.version !== undefined) {
      io.stdout(`keygate ${VERSION}`);
      return 0;
    }
    let words = positionals;
    let help = values.help !== undefined;
    if (words[0] === "help") {
      help = true;
      words = words.slice(1);
    }
    if (words.length === 0) {
      io.stdout(formatOverview());
      return 0;
    }
    const group = GROUPS.find((g) => g.name === words[0]);
    if (group === undefined) {
      throw new AdminError(`Unknown command "${clip(words[0])}" (see ${PROGRAM} help)`, 2);
    }
    const command = group.commands.find((c) => c.words.every((word, i) => words[i] === word));
    if (command === undefined) {
      if (words.length === 1) {
        io.stdout(formatGroup(group));
        return 0;
      }
      throw new AdminError(
        `Unknown command "${group.name} ${clip(words[1])}" (see ${PROGRAM} ${group.name} --help)`,
        2,
      );
    }
    if (help) {
      io.stdout(formatCommand(command));
      return 0;
    }
    const options = checkOptions(command, values);
    const commandArgs = checkArguments(command, words.slice(command.words.length));
    const { location, fromStore } = readLocation(values, io.env);
    if (location.kind === "postgres" && command.database === "path") {
      throw new AdminError(
        `"${command.words.join(" ")}" works on SQLite files only: on PostgreSQL use pg_restore`,
      );
    }
    // The file of a SQLite store; a PostgreSQL URL shown without its password.
    const dbPath = location.kind === "sqlite" ? location.path : location.display;
    if (location.kind === "sqlite") checkDatabase(command, dbPath, fromStore ? "store" : "db");
    const openAt = async () => {
      try {
        return await openStore(location, openOptions);
      } catch (error) {
        if (location.kind !== "postgres") throw error;
        throw new AdminError(
          `Cannot open the store ${location.display}: ${
            explainPostgresOpenError(error, location, io.env)
          }`,
        );
      }
    };

    const writeLog = overrides.audit ?? (options.log !== undefined ? io.stderr : undefined);
    const changeLog = writeLog === undefined
      ? undefined
      : createLogger({ level: "info", write: writeLog, clock: io.clock });
    const name = command.words.join(" ");
    const log = (fields: LogFields) =>
      changeLog?.info("admin change", {
        event: "admin_change",
        command: name,
        actor: toCliActor(io.env),
        db: dbPath,
        ...fields,
      });
    const changes = (store: Store): ChangeDeps => ({
      store,
      clock: io.clock,
      actor: toCliActor(io.env),
      noteChange: (entry) => log({ action: entry.action, subject: entry.subject, ...entry.detail }),
    });
    // As the server's --store-listen: without LISTEN/NOTIFY, the CLI's writes must not notify.
    let notifications = true;
    if ((io.env.KEYGATE_STORE_LISTEN ?? "") !== "") {
      try {
        notifications = parseBoolean(io.env.KEYGATE_STORE_LISTEN!);
      } catch (error) {
        throw new AdminError(`KEYGATE_STORE_LISTEN: ${(error as Error).message}`, 2);
      }
    }
    // A migration's warning (rows it left as they were) is one line, before the command's output.
    const openOptions = {
      onMigrationWarning: (line: string) => io.stderr(`keygate admin: warning: ${line}`),
      postgres: { notifications },
    };
    if (command.database !== "path") store = await openAt();
    const context: CommandContext = {
      get store() {
        if (store === undefined) throw new Error("The store is not open yet");
        return store;
      },
      async openStore() {
        store ??= await openAt();
        return store;
      },
      get changes() {
        return changes(context.store);
      },
      dbPath,
      args: commandArgs,
      options,
      io,
      log,
    };
    await command.run(context);
    return 0;
  } catch (error) {
    if (error instanceof AdminError) {
      io.stderr(`keygate admin: ${error.message}`);
      return error.exitCode;
    }
    if (error instanceof AuthError) {
      // The domain refused: a bad value is a usage error, the rest (not found, conflict) not.
      io.stderr(`keygate admin: ${error.message}`);
      return error.code === "invalid_request" ? 2 : 1;
    }
    if (error instanceof StoreError) {
      io.stderr(`keygate admin: ${oneLine(error.message)}`);
      return 1;
    }
    io.stderr(`keygate admin: ${oneLine((error as Error)?.message ?? String(error))}`);
    return 1;
  } finally {
    await store?.closeStore();
    if (overrides.hasher === undefined) io.hasher.close();
  }
}

/**
 * The store from --store/KEYGATE_STORE or --db/KEYGATE_DB, as the server reads them: a flag
 * overrides its own variable; --store and --db together are refused wherever each came from,
 * saying where.
 */
function readLocation(
  values: Record<string, string>,
  env: AdminIO["env"],
): { location: StoreLocation; fromStore: boolean } {
  const pick = (flag: string, variable: string) =>
    values[flag] !== undefined
      ? { text: values[flag], name: `--${flag}`, source: "flag" as const }
      : (env[variable] ?? "") !== ""
      ? { text: env[variable]!, name: variable, source: "env" as const }
      : undefined;
  const store = pick("store", "KEYGATE_STORE");
  const db = pick("db", "KEYGATE_DB");
  if (store !== undefined && db !== undefined) {
    throw new AdminError(
      `Give --store or --db, not both (${
        describeSource({ flag: "store", env: "KEYGATE_STORE" }, store.source)
      }; ${describeSource({ flag: "db", env: "KEYGATE_DB" }, db.source)}) (see ${PROGRAM} help)`,
      2,
    );
  }
  const given = store ?? db;
  try {
    if (store !== undefined) {
      return { location: parseStoreUrl(store.text.trim()), fromStore: true };
    }
    const path = (db?.text ?? DEFAULT_DB).trim();
    if (path === "") throw new SyntaxError("expected a path");
    checkDatabasePath(path);
    return { location: { kind: "sqlite", path, display: path }, fromStore: false };
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    throw new AdminError(
      `Invalid ${given!.name} "${showValue(given!.text)}": ${error.message}`,
      2,
    );
  }
}

/** Refuses options the command does not take; turns booleans given as `=off` into absence. */
function checkOptions(
  command: Command,
  values: Record<string, string>,
): Record<string, string | undefined> {
  const name = command.words.join(" ");
  const options: Record<string, string | undefined> = {};
  for (const [option, text] of Object.entries(values)) {
    const spec = command.options.find((o) => o.name === option) ??
      GLOBAL_OPTIONS.find((o) => o.name === option);
    if (spec === undefined) {
      throw new AdminError(
        `Option --${option} does not apply to "${name}" (see ${PROGRAM} ${name} --help)`,
        2,
      );
    }
    if (spec.kind === "boolean") {
      let on: boolean;
      try {
        on = parseBoolean(text);
      } catch (error) {
        throw new AdminError(`Invalid --${option} "${clip(text)}": ${(error as Error).message}`, 2);
      }
      if (on) options[option] = "on";
    } else {
      options[option] = text;
    }
  }
  return options;
}

/** Names the positionals; a missing or extra one is a usage error. */
function checkArguments(command: Command, rest: string[]): Record<string, string | undefined> {
  const usage = `usage: ${formatUsage(command)}`;
  const named: Record<string, string | undefined> = {};
  command.arguments.forEach((arg, i) => {
    if (rest[i] === undefined && !arg.optional) {
      throw new AdminError(`Missing ${arg.name} (${usage})`, 2);
    }
    named[arg.name] = rest[i];
  });
  if (rest.length > command.arguments.length) {
    if (command.readsPassword) {
      throw new AdminError(
        `Unexpected argument after ${command.arguments.at(-1)!.name}: ${PASSWORD_ARGUMENT}`,
        2,
      );
    }
    throw new AdminError(
      `Unexpected argument "${clip(rest[command.arguments.length])}" (${usage})`,
      2,
    );
  }
  return named;
}

/**
 * A directory is never a database; most commands need the file to exist already. `setting`:
 * which of --db and --store named the file.
 */
function checkDatabase(command: Command, dbPath: string, setting: "db" | "store"): void {
  if (dbPath === ":memory:") return;
  const exists = existsSync(dbPath);
  if (exists && statSync(dbPath).isDirectory()) {
    throw new AdminError(
      `Invalid --${setting} "${dbPath}": it is a directory, not a database file`,
      2,
    );
  }
  if (command.database === "create" && !exists) {
    try {
      mkdirSync(dirname(dbPath), { recursive: true });
    } catch (error) {
      throw new AdminError(
        `Cannot create the directory of --${setting} "${dbPath}": ${
          oneLine((error as Error).message)
        }`,
      );
    }
  }
  if (command.database === "existing" && !exists) {
    throw new AdminError(
      `No database at "${dbPath}": check --${setting} or KEYGATE_${setting.toUpperCase()} ` +
        "(nothing was created; " +
        `${PROGRAM} user add creates one)`,
    );
  }
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

/** An argument as a message shows it: without a password, at most 64 characters. */
function clip(text: string): string {
  const shown = redactCredentials(text);
  return shown.length > 64 ? `${shown.slice(0, 64)}…` : shown;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

if (import.meta.main) Deno.exit(await main(Deno.args));
