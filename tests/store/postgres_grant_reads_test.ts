/**
 * The PostgreSQL store's coalesced grant lookup (grant_reads.ts `selectGrants`) against a real
 * PostgreSQL: a batch answers the grants of its first `count` records only, each with its
 * record's position, and the statement keeps one generic plan whatever the batch's size instead
 * of being planned afresh on every execution (which cost PostgreSQL more CPU than the lookups).
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { openPostgresClient } from "../../src/store/postgres/connect.ts";
import { MAX_BATCH, selectGrants } from "../../src/store/postgres/grant_reads.ts";
import { openPostgresStore } from "../../src/store/postgres/open_postgres_store.ts";
import { parseStoreUrl, type PostgresLocation } from "../../src/store/store_url.ts";
import { startTestCluster } from "../_helpers/postgres_cluster.ts";
import { issue, seed, T0 } from "./_contract_fixtures.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;

/** 64-byte records (token digest, key digest) for the given token and key secrets. */
function recordsOf(pairs: [string, string][]): Uint8Array {
  const records = new Uint8Array(pairs.length * 64);
  pairs.forEach(([token, key], i) => {
    records.set(hashSecret(token), i * 64);
    records.set(hashSecret(key), i * 64 + 32);
  });
  return records;
}

Deno.test({
  name:
    "selectGrants() answers the batch's first records by position, and keeps one generic plan for every batch size",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("grant_reads");
    const store = await openPostgresStore(url, { maxConnections: 1 });
    const { user, key, tokenId } = await seed(store);
    const second = await issue(store, { userId: user.id, apiKeyId: key.id }, "t2");
    await store.closeStore();
    // One connection, set up as the store's: prepared statements are per session.
    const sql = openPostgresClient(parseStoreUrl(url) as PostgresLocation, { max: 1 });
    try {
      // A table of realistic size: on a handful of rows any plan is cheap, and the planner keeps
      // the generic one even for a statement it would plan afresh on a real database.
      await sql`INSERT INTO tokens (token_hash, user_id, api_key_id, issued_at, expires_at)
        SELECT sha256(('bulk-' || g)::bytea), ${user.id}, ${key.id}, ${T0}, ${T0 + 3_600_000}
        FROM generate_series(1, 200000) AS g`;
      await sql`ANALYZE`;
      const now = T0 + 1;
      for (let count = 1; count <= 12; count++) {
        // Unknown tokens, then t2 at position count - 1 and t1 just past the batch's end.
        const pairs: [string, string][] = Array.from(
          { length: count - 1 },
          (_, i) => [`unknown-${i}`, "k1"],
        );
        pairs.push(["t2", "k1"], ["t1", "k1"]);
        const rows = await selectGrants(sql, recordsOf(pairs), count, now);
        assert.deepEqual(
          rows.map((row) => [Number(row.i), Number(row.token_id)]),
          [[count - 1, second]],
          `batch of ${count}: t2 found at its position, t1 past the end not looked up`,
        );
      }
      // Every record of a full batch is looked up.
      const full: [string, string][] = Array.from({ length: MAX_BATCH }, () => ["t1", "k1"]);
      const all = await selectGrants(sql, recordsOf(full), MAX_BATCH, now);
      assert.equal(all.length, MAX_BATCH);
      assert.ok(all.every((row) => Number(row.token_id) === tokenId));
      const plans = await sql<{ generic: string; custom: string }[]>`
        SELECT generic_plans AS generic, custom_plans AS custom FROM pg_prepared_statements
        WHERE statement LIKE '%JOIN tokens t ON t.token_hash = h.token_hash%'
          AND statement NOT LIKE '%pg_prepared_statements%'`;
      assert.equal(plans.length, 1, "one prepared statement for every batch size");
      // PostgreSQL tries five custom plans, then keeps the generic one if it is no worse.
      assert.ok(Number(plans[0].custom) <= 5, `custom plans: ${plans[0].custom}`);
      assert.ok(Number(plans[0].generic) >= 8, `generic plans: ${plans[0].generic}`);
    } finally {
      await sql.end({ timeout: 1 });
    }
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
