/**
 * The PostgreSQL backend runs the store contract (contract.ts), each test on
 * a new database of a throwaway cluster.
 */
import postgres from "postgres";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { POSTGRES_SKIP, sharedPostgres } from "../_helpers/postgres_cluster.ts";
import { runStoreContract } from "./contract.ts";

if (POSTGRES_SKIP) {
  Deno.test({
    name: `[store contract: postgres] skipped: ${POSTGRES_SKIP}`,
    ignore: true,
    fn() {},
  });
} else {
  const cluster = await sharedPostgres();
  runStoreContract({
    name: "postgres",
    async open() {
      const url = await cluster.createDatabase("contract");
      const store = await openPostgresStore(url);
      const raw = postgres(url, { max: 1, onnotice: () => {} });
      return {
        store,
        async execSql(sql) {
          await raw.unsafe(sql);
        },
        async close() {
          await raw.end();
          await store.closeStore();
        },
      };
    },
  });
}
