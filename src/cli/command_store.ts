/**
 * The store an admin command works on, as the server reads it: `--store` /
 * `KEYGATE_STORE` or `--db` / `KEYGATE_DB`, checked before anything is
 * opened (a directory is never a database; most commands need the file to
 * exist), and opened with one line saying why not.
 *
 * @module
 */
import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { parseBoolean } from "../config/parsers.ts";
import { describeSource, showValue } from "../config/read_config.ts";
import { type OpenedStore, openStore } from "../store/open_store.ts";
import { explainPostgresOpenError } from "../store/postgres/explain_open.ts";
import { checkDatabasePath, parseStoreUrl, type StoreLocation } from "../store/store_url.ts";
import type { Command } from "./command.ts";
import { PROGRAM } from "./help.ts";
import { AdminError, type AdminIO, oneLine } from "./io.ts";

const DEFAULT_DB = "db/keygate.sqlite3";

/** Where a command's store is, and how to open it. */
export interface CommandStore {
  /** The file of a SQLite store; a PostgreSQL URL shown without its password. */
  dbPath: string;
  open(): Promise<OpenedStore>;
}

/**
 * Finds and checks the store of `command` from the options `values` and the environment; opens
 * nothing yet.
 */
export function findCommandStore(
  command: Command,
  { values, io }: { values: Record<string, string>; io: AdminIO },
): CommandStore {
  const { location, fromStore } = readLocation(values, io.env);
  if (location.kind === "postgres" && command.database === "path") {
    throw new AdminError(
      `"${command.words.join(" ")}" works on SQLite files only: on PostgreSQL use pg_restore`,
    );
  }
  const dbPath = location.kind === "sqlite" ? location.path : location.display;
  if (location.kind === "sqlite") checkDatabase(command, dbPath, fromStore ? "store" : "db");
  const notifications = readNotifications(io.env);
  // A migration's warning (rows it left as they were) is one line, before the command's output.
  const openOptions = {
    onMigrationWarning: (line: string) => io.stderr(`keygate admin: warning: ${line}`),
    postgres: { notifications },
  };
  return {
    dbPath,
    async open() {
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
    },
  };
}

/** As the server's --store-listen: without LISTEN/NOTIFY, the CLI's writes must not notify. */
function readNotifications(env: AdminIO["env"]): boolean {
  if ((env.KEYGATE_STORE_LISTEN ?? "") === "") return true;
  try {
    return parseBoolean(env.KEYGATE_STORE_LISTEN!);
  } catch (error) {
    throw new AdminError(`KEYGATE_STORE_LISTEN: ${(error as Error).message}`, 2);
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
