/**
 * Tests that run only on PostgreSQL and read its database directly (plans, types), beside the
 * store the suite runs on.
 *
 * @module
 */
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { openTestStore, TEST_STORE_NAME, type TestStore } from "./store.ts";

/** A client of one connection to a test store's database. */
export type RawPostgres = ReturnType<typeof openPostgresClient>;

/**
 * Registers a test that runs only when the suite runs on PostgreSQL (`KEYGATE_TEST_STORE`): `fn`
 * gets a fresh test store and a client of one connection to its database, both closed after it.
 */
export function testOnPostgres(
  name: string,
  fn: (sql: RawPostgres, db: TestStore) => Promise<void>,
): void {
  Deno.test({
    name,
    ignore: TEST_STORE_NAME !== "postgres",
    sanitizeResources: false,
    async fn() {
      await using db = await openTestStore();
      const sql = openPostgresClient(parseStoreUrl(db.path) as PostgresLocation, { max: 1 });
      try {
        await fn(sql, db);
      } finally {
        await sql.end();
      }
    },
  });
}
