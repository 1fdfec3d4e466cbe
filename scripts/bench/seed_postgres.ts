/**
 * Copies a benchmark database seeded by {@link seedDatabase} (through the SQLite store) into an
 * empty PostgreSQL database migrated by keygate's own PostgreSQL store: the users, API keys and
 * tokens, row for row with their ids, so that both backends hold the same data and the same
 * credentials work on both. Inserting a million tokens one store call at a time would take many
 * minutes; this sends multi-row INSERTs of {@link BATCH} rows, then moves the identity sequences
 * past the copied ids and settles the database ({@link settleDatabase}).
 *
 * @module
 */
import { DatabaseSync, type SQLOutputValue } from "node:sqlite";
import postgres from "postgres";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";

/** Rows per INSERT (PostgreSQL takes at most 65,535 parameters per statement). */
const BATCH = 5000;

/** The columns copied, present in both schemas; the rest keep their defaults. */
const TABLES = {
  users: [
    "id",
    "email",
    "password_hash",
    "token_timeout_seconds",
    "disabled",
    "created_at",
    "updated_at",
  ],
  api_keys: ["id", "key_hash", "prefix", "user_id", "label", "created_at", "introspect"],
  tokens: ["id", "token_hash", "user_id", "api_key_id", "issued_at", "expires_at"],
} as const;

/** Copies `sqlitePath`'s users, keys and tokens into the (new, empty) database at `url`. */
export async function copySeedToPostgres(sqlitePath: string, url: string): Promise<void> {
  // Opening the store applies keygate's migrations: the schema is the server's own.
  const store = await openPostgresStore(url, { applicationName: "keygate-bench-seed" });
  await store.closeStore();
  const source = new DatabaseSync(sqlitePath, { readOnly: true });
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    for (const [table, columns] of Object.entries(TABLES)) {
      const select = source.prepare(
        `SELECT ${columns.join(", ")} FROM ${table} WHERE id > ? ORDER BY id LIMIT ${BATCH}`,
      );
      let last = 0;
      for (;;) {
        const rows = select.all(last) as Record<string, SQLOutputValue>[];
        if (rows.length === 0) break;
        const values = rows.map((row) =>
          Object.fromEntries(
            columns.map((c) => [c, row[c] instanceof Uint8Array ? row[c] : row[c] ?? null]),
          )
        );
        await sql`INSERT INTO ${sql(table)} ${sql(values as never, ...columns)}`;
        last = Number(rows[rows.length - 1].id);
      }
      await sql.unsafe(
        `SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT max(id) FROM ${table}))`,
      );
    }
  } finally {
    source.close();
    await sql.end();
  }
  await settleDatabase(url);
}

/**
 * Settles a database just loaded with a million rows before anything is measured on it:
 * `VACUUM (FREEZE, ANALYZE)` does at once what autovacuum would otherwise start on the inserted
 * rows (its insert threshold: visibility map, hint bits, freezing, statistics), and `CHECKPOINT`
 * writes the pages that work dirtied. Unsettled, both ran in the measured rounds on the core that
 * PostgreSQL shares with the servers: the section's first rounds were slow for every server on
 * the database alike, and its CPU was counted as the database's per request
 * (docs/performance.md, "A cheaper miss on PostgreSQL", the seventh run).
 */
export function settleDatabase(url: string): Promise<void> {
  return runStatements(url, ["VACUUM (FREEZE, ANALYZE)", "CHECKPOINT"]);
}

/**
 * Runs `statements` one after another on one connection to `url`, each alone (the simple query
 * protocol: no transaction block around it, as `VACUUM` and `ALTER SYSTEM` need).
 */
export async function runStatements(url: string, statements: string[]): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    for (const statement of statements) await sql.unsafe(statement);
  } finally {
    await sql.end();
  }
}
