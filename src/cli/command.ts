/**
 * What an admin command is: its words, the arguments and options it takes
 * (one table per command, from which parsing and help are generated), how
 * it uses the database, and what it does.
 *
 * @module
 */
import type { ChangeDeps } from "../auth/changes.ts";
import type { LogFields } from "../platform/logger.ts";
import type { PostgresDiagnostics } from "../store/postgres/open_postgres_store.ts";
import type { SqliteMaintenance } from "../store/sqlite/maintenance.ts";
import type { Store } from "../store/store.ts";
import type { AdminIO } from "./io.ts";

/** A positional argument. */
export interface CommandArgument {
  /** Upper case, as help shows it: `EMAIL`, `KEY`. */
  name: string;
  description: string;
  optional?: boolean;
}

/** An option of one command. */
export interface CommandOption {
  /** The long name, without `--`. */
  name: string;
  /** `boolean`: a bare flag; otherwise it takes a value shown as {@link placeholder}. */
  kind: "value" | "boolean";
  placeholder?: string;
  description: string;
}

/** What a command is given when it runs. */
export interface CommandContext {
  /**
   * The store, opened before the command runs (a `path` command opens it
   * with {@link openStore} once the file is in place).
   */
  readonly store: Store;
  /** SQLite's own operations, once the store is open on SQLite (`OpenedStore.maintenance`). */
  readonly maintenance: SqliteMaintenance | undefined;
  /** PostgreSQL's diagnostics, once the store is open on PostgreSQL (`OpenedStore.postgres`). */
  readonly postgres: PostgresDiagnostics | undefined;
  /** Opens the store at {@link dbPath} (once). */
  openStore(): Promise<Store>;
  /**
   * What the domain's audited changes need: the store, the clock, the CLI user
   * as actor, and the change log (`--log`).
   */
  readonly changes: ChangeDeps;
  /** The database path (`--db`, `KEYGATE_DB` or the default). */
  dbPath: string;
  /** The positional arguments, by {@link CommandArgument.name}. */
  args: Readonly<Record<string, string | undefined>>;
  /** The options given, as text (`"on"` for a bare boolean). */
  options: Readonly<Record<string, string | undefined>>;
  io: AdminIO;
  /** Logs a change that has no audit action (a backup), with `--log` only. */
  log(fields: LogFields): void;
}

/** One admin command. */
export interface Command {
  /** The words that name it: `["user", "add"]`, `["audit"]`. */
  words: readonly string[];
  /** One line for the command list. */
  summary: string;
  /** More, for the command's own help. */
  description?: string;
  arguments: readonly CommandArgument[];
  options: readonly CommandOption[];
  /** It reads a password from standard input (a password argument gets a pointed error). */
  readsPassword?: boolean;
  /**
   * `existing`: the database file must exist (read-only and most changes, so a typo in
   * `--db` never leaves an empty file behind); `create`: it may be created; `path`: the
   * command handles the file itself.
   */
  database: "existing" | "create" | "path";
  run(context: CommandContext): Promise<void> | void;
}
