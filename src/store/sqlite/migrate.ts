/**
 * Applies the SQLite schema's migrations (migrations.ts) to a database: each in its own
 * transaction, the ones newer than `PRAGMA user_version`, and refuses a schema newer than this
 * keygate knows.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";

/** One schema step: SQL, or a data step in JavaScript (`sql` then only says what it does). */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** Runs instead of `sql`, in the migration's transaction; may return a warning line. */
  run?(db: DatabaseSync): string | undefined;
}

/**
 * Applies the migrations newer than `PRAGMA user_version`, each in its own
 * transaction; resolves to the warning lines of the data steps that ran.
 */
export function migrate(db: DatabaseSync, migrations: readonly Migration[]): string[] {
  const warnings: string[] = [];
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new Error(
        `Migration ${migration.name} is numbered ${migration.version}, not ${index + 1}`,
      );
    }
  });
  for (const migration of migrations) {
    db.exec("BEGIN IMMEDIATE");
    try {
      const { user_version } = db.prepare("PRAGMA user_version").get() as { user_version: number };
      if (user_version > migrations.length) {
        throw new Error(
          `Database schema version ${user_version} is newer than this keygate knows (${migrations.length}): upgrade keygate`,
        );
      }
      if (user_version < migration.version) {
        if (migration.run === undefined) db.exec(migration.sql);
        else {
          const warning = migration.run(db);
          if (warning !== undefined) warnings.push(warning);
        }
        db.exec(`PRAGMA user_version = ${migration.version}`);
      }
      db.exec("COMMIT");
    } catch (error) {
      db.exec("ROLLBACK");
      throw error;
    }
  }
  return warnings;
}
