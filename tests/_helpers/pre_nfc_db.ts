/**
 * A SQLite database as keygate left it before e-mail addresses were stored
 * in canonical form (schema version 5), holding three users: two whose
 * addresses are the same in NFC (one left alone by the migration) and one
 * that the migration rewrites.
 */
import { DatabaseSync } from "node:sqlite";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { MIGRATIONS } from "../../src/store/sqlite/migrations.ts";

export function writePreNfcDatabase(path: string): void {
  const raw = new DatabaseSync(path);
  try {
    migrate(raw, MIGRATIONS.filter((m) => m.version <= 5));
    for (const email of ["caf\u00e9@b.org", "cafe\u0301@b.org", "e\u0301mile@b.org"]) {
      raw.prepare(
        "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES (?, 'x', 1, 1)",
      ).run(email);
    }
  } finally {
    raw.close();
  }
}
