/**
 * The statements that take a list of ids from keygate (a lease's walk of rotation chains, a
 * return's read of which limits are users', the key-usage flush) find each row through its
 * primary key, however few the ids and however large the table: the ids go as an array whose
 * length the planner sees (`toIdArray`, src/store/postgres/rows.ts). Before, they went as a JSON
 * array unpacked in SQL, which the planner takes for 100 rows: with one id among 20,000 keys it
 * chose a hash join over a scan of the whole key table, on every lease, and in every key-usage
 * flush. (The return's read of the limits happened to find its rows through an index before too,
 * with these sizes; it takes the same form.) Read from the transaction's own statistics
 * (`pg_stat_xact_user_tables`), after `ANALYZE`.
 */
import assert from "node:assert/strict";
import type postgres from "postgres";
import { writeKeyUsage } from "../../../src/store/postgres/api_keys.ts";
import { toLimitKeys, toReturnSubjects } from "../../../src/store/postgres/limit_chains.ts";
import { toIdArray } from "../../../src/store/postgres/rows.ts";
import { testOnPostgres } from "../../_helpers/postgres_raw.ts";

const KEYS = 20_000;

/**
 * Sequential and index scans of `table` that `run` made, in a transaction of their own. The
 * transaction's counts are read before and after: `pg_stat_xact_user_tables` shows what the
 * session has not yet reported, which may include earlier transactions (reports are at most one
 * a second), but nothing is reported while a transaction runs.
 */
async function scansBy(
  tx: postgres.TransactionSql,
  tables: string[],
  run: () => Promise<void>,
): Promise<Record<string, [number, number]>> {
  const read = async () =>
    new Map(
      (await tx`SELECT relname, seq_scan, idx_scan FROM pg_stat_xact_user_tables
        WHERE relname IN ${tx(tables)}`).map((row) => [
        row.relname as string,
        [Number(row.seq_scan), Number(row.idx_scan)],
      ]),
    );
  const before = await read();
  await run();
  const after = await read();
  return Object.fromEntries(tables.map((table) => {
    const [seq, index] = after.get(table) ?? [0, 0];
    const [seq0, index0] = before.get(table) ?? [0, 0];
    return [table, [seq - seq0, index - index0]];
  }));
}

testOnPostgres(
  "[postgres] lists of ids are looked up through the primary key, never by a scan of the table",
  async (sql) => {
    await sql.unsafe(`INSERT INTO users (email, password_hash, created_at, updated_at)
      SELECT 'u' || n || '@example.org', 'x', 0, 0 FROM generate_series(1, ${KEYS}) AS s(n)`);
    await sql.unsafe(`INSERT INTO api_keys (key_hash, prefix, user_id, created_at)
      SELECT sha256(convert_to('k' || id, 'UTF8')), 'k', id, 0 FROM users`);
    await sql.unsafe(`INSERT INTO limits (scope, api_key_id, kind, period, max, created_at,
        updated_at)
      SELECT 'key', id, 'rate', 'minute', 100, 0, 0 FROM api_keys WHERE id % 10 = 0`);
    await sql.unsafe("ANALYZE users, api_keys, limits");
    // A key with a limit of its own (a tenth of the keys have one), half way through the table.
    const [key] = await sql`SELECT api_key_id AS id FROM limits ORDER BY id OFFSET ${KEYS / 20}
      LIMIT 1`;
    const keyId = Number(key.id);
    const [limit] = await sql`SELECT id FROM limits WHERE api_key_id = ${keyId}`;
    const limitId = Number(limit.id);

    await sql.begin(async (tx) => {
      // A lease of one key, holding it: the key itself ends its chain.
      const scans = await scansBy(tx, ["api_keys"], async () => {
        assert.deepEqual(await toLimitKeys(tx, [keyId], true), new Map([[keyId, keyId]]));
      });
      assert.equal(scans.api_keys[0], 0, "no scan of the key table");
      assert.ok(scans.api_keys[1] >= 1, `index scans: ${scans.api_keys[1]}`);
    });
    await sql.begin(async (tx) => {
      // A return of a key limit's units: the units stay the key's.
      const units = [{ limitId, subjectId: keyId, windowStart: 0, units: 5 }];
      const scans = await scansBy(tx, ["api_keys", "limits"], async () => {
        assert.deepEqual(await toReturnSubjects(tx, units), units);
      });
      assert.equal(scans.limits[0], 0, "no scan of the limit table");
      assert.equal(scans.api_keys[0], 0, "no scan of the key table");
    });
    await sql.begin(async (tx) => {
      const scans = await scansBy(tx, ["api_keys"], async () => {
        await writeKeyUsage(tx, [{ id: keyId, at: 1000, address: "192.0.2.1", count: 3 }]);
      });
      assert.equal(scans.api_keys[0], 0, "no scan of the key table");
    });
    const [used] = await sql`SELECT use_count, last_used_at, last_used_from FROM api_keys
      WHERE id = ${keyId}`;
    assert.deepEqual([Number(used.use_count), Number(used.last_used_at), used.last_used_from], [
      3,
      1000,
      "192.0.2.1",
    ]);
  },
);

Deno.test("toIdArray() writes row ids as an array literal and refuses anything else", () => {
  assert.equal(toIdArray([]), "{}");
  assert.equal(toIdArray([1, 20, 300]), "{1,20,300}");
  for (const bad of [1.5, NaN, Infinity, 2 ** 53]) {
    assert.throws(() => toIdArray([1, bad]), TypeError);
  }
});
