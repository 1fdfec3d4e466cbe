/**
 * Applies the PostgreSQL migrations, safely when N instances start at once.
 *
 * `keygate_migrations` records each applied migration with a SHA-256 of its
 * SQL. Its row `version = 0` is a lock row: every migration runs in its own
 * transaction that first takes that row `FOR UPDATE`, so concurrent starters
 * queue behind one another and each re-reads what is applied once it holds
 * the lock. No session advisory lock: the lock is a row, released by COMMIT
 * or by the server when a connection dies, and works on any PostgreSQL-wire
 * engine with row locks.
 *
 * @module
 */
import type postgres from "postgres";
import { POSTGRES_MIGRATIONS, type PostgresMigration } from "./schema.ts";

/** The database's schema is newer than this keygate: the one-line reason it refuses to start. */
export class SchemaTooNew extends Error {
  override name = "SchemaTooNew";
}

/** A migration recorded in the database differs from this keygate's copy. */
export class SchemaMismatch extends Error {
  override name = "SchemaMismatch";
}

const BOOTSTRAP = `CREATE TABLE IF NOT EXISTS keygate_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  checksum text NOT NULL,
  applied_at bigint NOT NULL
)`;

/** PostgreSQL error codes of a concurrent `CREATE TABLE IF NOT EXISTS` that lost the race. */
const LOST_CREATE_RACE = new Set(["23505", "42P07", "42710"]);

/** SHA-256 of a migration's SQL, hex. */
export async function checksumOf(migration: PostgresMigration): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(migration.sql),
  );
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** What {@link migratePostgres} did. */
export interface MigrateResult {
  /** Versions this call applied, in order. */
  applied: number[];
  /** The schema version afterwards. */
  version: number;
  /** The one-line warnings of the data steps this call applied (never addresses). */
  warnings: string[];
}

/**
 * Brings the database up to the newest migration. Throws {@link SchemaTooNew}
 * when the database has a migration this keygate does not know, and
 * {@link SchemaMismatch} when an applied one differs from ours.
 */
export async function migratePostgres(
  sql: postgres.Sql,
  migrations: readonly PostgresMigration[] = POSTGRES_MIGRATIONS,
  now: () => number = Date.now,
): Promise<MigrateResult> {
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new Error(
        `Migration ${migration.name} is numbered ${migration.version}, not ${index + 1}`,
      );
    }
  });
  await bootstrap(sql);
  const checksums = await Promise.all(migrations.map(checksumOf));
  const applied: number[] = [];
  const warnings: string[] = [];
  for (;;) {
    const step = await sql.begin(async (tx) => {
      await tx`SELECT version FROM keygate_migrations WHERE version = 0 FOR UPDATE`;
      const rows = await tx<{ version: number; name: string; checksum: string }[]>`
        SELECT version, name, checksum FROM keygate_migrations WHERE version > 0 ORDER BY version`;
      const newest = rows.length === 0 ? 0 : Number(rows[rows.length - 1].version);
      if (newest > migrations.length) {
        throw new SchemaTooNew(
          `Database schema version ${newest} is newer than this keygate knows (${migrations.length}): upgrade keygate`,
        );
      }
      for (const row of rows) {
        const index = Number(row.version) - 1;
        if (row.checksum !== checksums[index]) {
          throw new SchemaMismatch(
            `Database migration ${row.version} ("${row.name}") differs from this keygate's: ` +
              "the schema was changed by hand or by another build",
          );
        }
      }
      const next = migrations[newest];
      if (next === undefined) return { done: true as const, version: newest };
      let warning: string | undefined;
      if (next.run === undefined) await tx.unsafe(next.sql);
      else warning = await next.run(tx);
      await tx`INSERT INTO keygate_migrations (version, name, checksum, applied_at)
        VALUES (${next.version}, ${next.name}, ${checksums[next.version - 1]}, ${now()})`;
      return { done: false as const, version: next.version, warning };
    });
    if (step.done) return { applied, version: step.version, warnings };
    applied.push(step.version);
    if (step.warning !== undefined) warnings.push(step.warning);
  }
}

/** Creates the migrations table and its lock row if missing; concurrent starters may race here. */
async function bootstrap(sql: postgres.Sql): Promise<void> {
  for (let attempt = 1;; attempt++) {
    try {
      await sql.begin(async (tx) => {
        await tx.unsafe(BOOTSTRAP);
        await tx`INSERT INTO keygate_migrations (version, name, checksum, applied_at)
          VALUES (0, 'lock', '', 0) ON CONFLICT (version) DO NOTHING`;
      });
      return;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (attempt >= 5 || code === undefined || !LOST_CREATE_RACE.has(code)) throw error;
    }
  }
}

/** The newest applied migration, 0 for an empty database. */
export async function readSchemaVersion(sql: postgres.Sql): Promise<number> {
  const [{ exists }] = await sql<{ exists: boolean }[]>`
    SELECT to_regclass('keygate_migrations') IS NOT NULL AS exists`;
  if (!exists) return 0;
  const [row] = await sql<{ version: number }[]>`
    SELECT coalesce(max(version), 0) AS version FROM keygate_migrations`;
  return Number(row.version);
}
