/**
 * A deletion forgets its address's portal counters by subject prefix (src/store/postgres/
 * user_deletion.ts) through `login_failures_by_subject_c`, never a scan of every counter, on a
 * database whose collation is not "C" (production's usual; the test clusters' `initdb
 * --no-locale` is "C", under which the primary key would serve the prefix and hide a scan):
 * `EXPLAIN` over 100,000 counters, seeded in one statement and analysed. And the range is exact.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { FORGET_COUNTERS_SQL } from "../../src/store/postgres/user_deletion.ts";
import { toPrefixEnd } from "../../src/store/prefix_end.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { TEST_STORE_NAME } from "../_helpers/store.ts";

const ROWS = 100_000;
const DIGEST = "0123456789abcdef0123456789abcdef";

/** Counters of 20,000 addresses, five kinds each, as the portal's throttle names them. */
const SEED = `INSERT INTO login_failures (subject, failures, last_failure_at, blocked_until,
    forget_at)
  SELECT CASE n % 5 WHEN 0 THEN 'portal-login:' || md5(n::text) || ':198.51.100.0/24'
      WHEN 1 THEN 'portal-login-all:' || md5(n::text)
      WHEN 2 THEN 'portal-mail:' || md5(n::text) || ':198.51.100.0/24'
      WHEN 3 THEN 'portal-known:' || md5(n::text) || ':198.51.100.7'
      ELSE 'client:10.' || (n % 250) || '.' || (n % 199) || '.' || n % 7 || '-' || n END,
    1, 1, 0, 9999999999999
  FROM generate_series(1, ${ROWS}) AS n`;

Deno.test({
  name: "[postgres] forgetting counters by prefix reads an index under a non-C collation",
  ignore: TEST_STORE_NAME !== "postgres",
  sanitizeResources: false,
  async fn() {
    const { sharedPostgres } = await import("../_helpers/postgres_cluster.ts");
    const cluster = await sharedPostgres();
    const name = `forget_${crypto.randomUUID().slice(0, 8)}`;
    const admin = postgres(cluster.urlOf("postgres"), { max: 1, onnotice: () => {} });
    try {
      // ICU's en-US, as a production database created under an en_US locale sorts.
      await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu
        ICU_LOCALE 'en-US' LOCALE 'C.utf8'`);
      const url = cluster.urlOf(name);
      const store = await openPostgresStore(url); // migrates
      await store.closeStore();
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const [db] = await sql`SELECT datlocprovider, daticulocale FROM pg_database
          WHERE datname = current_database()`;
        assert.deepEqual([db.datlocprovider, db.daticulocale], ["i", "en-US"]);
        await sql.unsafe(SEED);
        const prefix = `portal-login:${DIGEST}:`;
        const kept = [`portal-login:${DIGEST}`, `portal-login:${DIGEST};x`, `portal-login-all:x`];
        for (const subject of [`${prefix}198.51.100.0/24`, `${prefix}2001:db8::/64`, ...kept]) {
          await sql`INSERT INTO login_failures (subject, failures, last_failure_at,
            blocked_until, forget_at) VALUES (${subject}, 1, 1, 0, 9999999999999)`;
        }
        await sql.unsafe("ANALYZE login_failures");
        const params = [prefix, toPrefixEnd(prefix)];
        const rows = await sql.unsafe(`EXPLAIN ${FORGET_COUNTERS_SQL}`, params);
        const plan = rows.map((row) => row["QUERY PLAN"] as string).join("\n");
        assert.match(
          plan,
          /Index (Only )?Scan using login_failures_by_subject_c|Bitmap Index Scan on login_failures_by_subject_c/,
          plan,
        );
        assert.doesNotMatch(plan, /Seq Scan/, plan);
        // Exact: the prefix's two counters go, the neighbours stay.
        const deleted = await sql.unsafe(`${FORGET_COUNTERS_SQL} RETURNING subject`, params);
        assert.deepEqual(deleted.map((row) => row.subject).sort(), [
          `${prefix}198.51.100.0/24`,
          `${prefix}2001:db8::/64`,
        ]);
        const left = await sql`SELECT subject FROM login_failures WHERE subject IN ${sql(kept)}`;
        assert.equal(left.length, kept.length);
        assert.equal(
          Number((await sql`SELECT count(*) AS n FROM login_failures`)[0].n),
          ROWS + kept.length,
        );
      } finally {
        await sql.end();
      }
    } finally {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name}`);
      await admin.end();
    }
  },
});
