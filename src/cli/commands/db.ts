/**
 * `admin db …`: back up, check and restore the SQLite database; migrate either backend.
 *
 * @module
 */
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { recordDatabaseRestored } from "../../auth/admin_tasks.ts";
import { inspectDatabaseFile, restoreDatabaseFile } from "../../store/sqlite/maintenance.ts";
import type { SqliteMaintenance } from "../../store/sqlite/maintenance.ts";
import type { Command, CommandContext } from "../command.ts";
import { AdminError } from "../io.ts";

/** The `db` commands. */
export const DB_COMMANDS: readonly Command[] = [
  {
    words: ["db", "backup"],
    summary: "Write a consistent copy to a new file and check it; safe while the server runs",
    arguments: [{ name: "PATH", description: "The backup file to create (must not exist)" }],
    options: [],
    database: "existing",
    async run(context) {
      const { args, io, log } = context;
      const path = args.PATH!;
      if (context.postgres !== undefined) {
        throw new AdminError(
          '"db backup" copies SQLite files; on PostgreSQL use pg_dump: ' +
            "pg_dump --format=custom --file keygate.dump DATABASE_URL (docs/postgres.md)",
        );
      }
      if (existsSync(path)) throw new AdminError(`Cannot write backup: "${path}" already exists`);
      await sqliteOnly(context, "db backup").backupDatabaseTo(path);
      const { problems, counts } = inspectDatabaseFile(path);
      if (problems.length > 0) {
        throw new AdminError(`Backup "${path}" failed its integrity check: ${problems[0]}`);
      }
      log({ path, users: counts.users, api_keys: counts.api_keys, tokens: counts.tokens });
      io.stdout(
        `Wrote backup ${path}: ${counts.users} user(s), ${counts.api_keys} API key(s), ` +
          `${counts.tokens} token row(s); integrity ok`,
      );
    },
  },
  {
    words: ["db", "check"],
    summary: "Run an integrity check; exit 1 on problems",
    arguments: [],
    options: [],
    database: "existing",
    // deno-lint-ignore require-await
    async run(context) {
      const { io } = context;
      const problems = sqliteOnly(context, "db check").checkDatabaseIntegrity();
      for (const problem of problems) io.stdout(problem);
      if (problems.length > 0) {
        throw new AdminError(`Integrity check failed: ${problems.length} problem(s)`);
      }
      io.stdout("Integrity check: ok");
    },
  },
  {
    words: ["db", "migrate"],
    summary: "Apply pending schema migrations (the server also does at start)",
    description: "Opening the store applies what is pending; on PostgreSQL serialised with " +
      "any instances starting at the same time.",
    arguments: [],
    options: [],
    database: "create",
    async run({ store, io }) {
      io.stdout(`Schema is up to date (${await store.countRows("users")} user(s))`);
    },
  },
  {
    words: ["db", "restore"],
    summary: "Replace the database with a checked backup; stop the server first",
    description: "Checks the backup's integrity, copies it over --db (creating it if missing) " +
      "and applies pending migrations. An existing database is replaced only with --replace.",
    arguments: [{ name: "BACKUP", description: "A file written by db backup" }],
    options: [{
      name: "replace",
      kind: "boolean",
      description: "Overwrite an existing database (everything since the backup is lost)",
    }],
    database: "path",
    async run(context) {
      const { args, options, dbPath, io } = context;
      const from = args.BACKUP!;
      if (!existsSync(from)) throw new AdminError(`No backup file "${from}"`);
      let inspected;
      try {
        inspected = inspectDatabaseFile(from);
      } catch (error) {
        throw new AdminError(
          `Cannot restore from "${from}": not a keygate backup (${(error as Error).message})`,
        );
      }
      if (inspected.problems.length > 0) {
        throw new AdminError(
          `Cannot restore from "${from}": it failed its integrity check: ${inspected.problems[0]}`,
        );
      }
      if (existsSync(dbPath) && options.replace === undefined) {
        throw new AdminError(
          `Refusing to replace the database "${dbPath}": stop the server, then run again ` +
            "with --replace (everything written since the backup is lost)",
        );
      }
      mkdirSync(dirname(dbPath), { recursive: true });
      await restoreDatabaseFile(from, dbPath);
      const { counts } = inspected;
      // Opening the restored file applies pending migrations.
      await context.openStore();
      await recordDatabaseRestored(context.changes, {
        from,
        users: counts.users,
        apiKeys: counts.api_keys,
        tokens: counts.tokens,
      });
      io.stdout(
        `Restored ${dbPath} from ${from}: ${counts.users} user(s), ${counts.api_keys} API ` +
          `key(s), ${counts.tokens} token row(s)`,
      );
    },
  },
];

/** The SQLite-only operations, for commands that need them. */
function sqliteOnly(context: CommandContext, command: string): SqliteMaintenance {
  const { maintenance } = context;
  if (maintenance === undefined) {
    throw new AdminError(`"${command}" works on SQLite only: use the database's own tools`);
  }
  return maintenance;
}
