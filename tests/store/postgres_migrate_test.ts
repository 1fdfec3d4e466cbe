import assert from "node:assert/strict";
import postgres from "postgres";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import {
  migratePostgres,
  readSchemaVersion,
  SchemaMismatch,
  SchemaTooNew,
} from "../../src/store/postgres/migrate.ts";
import { POSTGRES_MIGRATIONS } from "../../src/store/postgres/schema.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { assertCanonicalEmailsMigrated, PRE_NFC_EMAILS } from "./_contract_fixtures.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

async function freshClient(): Promise<postgres.Sql> {
  const url = await cluster!.createDatabase("migrate");
  return openPostgresClient(parseStoreUrl(url) as PostgresLocation, { max: 2 });
}

Deno.test({
  name: "migratePostgres() creates the schema once and records checksums",
  ignore,
  async fn() {
    const sql = await freshClient();
    try {
      assert.equal(await readSchemaVersion(sql), 0);
      const first = await migratePostgres(sql);
      assert.deepEqual(first, {
        applied: POSTGRES_MIGRATIONS.map((m) => m.version),
        version: POSTGRES_MIGRATIONS.length,
        warnings: [],
      });
      assert.deepEqual(await migratePostgres(sql), {
        applied: [],
        version: POSTGRES_MIGRATIONS.length,
        warnings: [],
      });
      const rows = await sql`SELECT version, checksum FROM keygate_migrations ORDER BY version`;
      assert.equal(rows.length, POSTGRES_MIGRATIONS.length + 1); // plus the lock row
      assert.match(rows[1].checksum, /^[0-9a-f]{64}$/);
      const [epoch] = await sql`SELECT epoch FROM grant_epoch`;
      // Created at 1; the change record's migration recorded `all` at 2.
      assert.equal(Number(epoch.epoch), 2);
    } finally {
      await sql.end();
    }
  },
});

Deno.test({
  name: "migratePostgres() from four instances at once applies each migration exactly once",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("migrate");
    const location = parseStoreUrl(url) as PostgresLocation;
    const clients = Array.from({ length: 4 }, () => openPostgresClient(location, { max: 1 }));
    try {
      const results = await Promise.all(clients.map((sql) => migratePostgres(sql)));
      const applied = results.flatMap((result) => result.applied).sort((a, b) => a - b);
      assert.deepEqual(applied, POSTGRES_MIGRATIONS.map((m) => m.version));
      for (const result of results) assert.equal(result.version, POSTGRES_MIGRATIONS.length);
      const [{ n }] = await clients[0]`SELECT count(*) AS n FROM users`;
      assert.equal(n, 0);
    } finally {
      await Promise.all(clients.map((sql) => sql.end()));
    }
  },
});

Deno.test({
  name: "migratePostgres() refuses a schema newer than it knows, in one line",
  ignore,
  async fn() {
    const sql = await freshClient();
    try {
      const newer = [...POSTGRES_MIGRATIONS, {
        version: POSTGRES_MIGRATIONS.length + 1,
        name: "from the future",
        sql: "CREATE TABLE future (id integer)",
      }];
      await migratePostgres(sql, newer);
      await assert.rejects(migratePostgres(sql), (error: unknown) => {
        assert.ok(error instanceof SchemaTooNew);
        assert.equal(
          error.message,
          `Database schema version ${newer.length} is newer than this keygate knows (${POSTGRES_MIGRATIONS.length}): upgrade keygate`,
        );
        return true;
      });
    } finally {
      await sql.end();
    }
  },
});

Deno.test({
  name: "migratePostgres() refuses an applied migration whose SQL differs from its own",
  ignore,
  async fn() {
    const sql = await freshClient();
    try {
      const changed = [{
        ...POSTGRES_MIGRATIONS[0],
        sql: POSTGRES_MIGRATIONS[0].sql + "\n-- edited",
      }];
      await migratePostgres(sql, changed);
      await assert.rejects(migratePostgres(sql), SchemaMismatch);
    } finally {
      await sql.end();
    }
  },
});

Deno.test({
  name: "migratePostgres() rolls a failing migration back whole",
  ignore,
  async fn() {
    const sql = await freshClient();
    try {
      const broken = [...POSTGRES_MIGRATIONS, {
        version: POSTGRES_MIGRATIONS.length + 1,
        name: "half",
        sql: "CREATE TABLE half (id integer); SELECT no_such_function();",
      }];
      await assert.rejects(migratePostgres(sql, broken), /no_such_function/);
      assert.equal(await readSchemaVersion(sql), POSTGRES_MIGRATIONS.length);
      const [{ half }] = await sql`SELECT to_regclass('half') IS NOT NULL AS half`;
      assert.equal(half, false);
    } finally {
      await sql.end();
    }
  },
});

Deno.test({
  name:
    "migration 3 stores older e-mails in NFC, leaves colliding ones and warns once, naming no address",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("migrate");
    const sql = openPostgresClient(parseStoreUrl(url) as PostgresLocation, { max: 2 });
    try {
      await migratePostgres(sql, POSTGRES_MIGRATIONS.filter((m) => m.version <= 2));
      for (const [email] of PRE_NFC_EMAILS) {
        await sql`INSERT INTO users (email, password_hash, created_at, updated_at)
          VALUES (${email}, 'x', 1, 1)`;
      }
    } finally {
      await sql.end();
    }
    await assertCanonicalEmailsMigrated(
      (onMigrationWarning) => openPostgresStore(url, { onMigrationWarning }),
      PRE_NFC_EMAILS,
    );
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
