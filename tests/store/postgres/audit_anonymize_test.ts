/**
 * toTextArray(): the `text[]` literal the anonymisation's reads pass their actions in (so the
 * planner sees the elements: tests/store/audit_anonymize_plan_test.ts), read back by PostgreSQL
 * element for element, whatever a value holds.
 *
 * @module
 */
import assert from "node:assert/strict";
import { toTextArray } from "../../../src/store/postgres/audit_anonymize.ts";
import { openPostgresClient } from "../../../src/store/postgres/connect.ts";
import { parseStoreUrl, type PostgresLocation } from "../../../src/store/store_url.ts";
import { AUDIT_ADDRESS_DETAIL_ACTIONS } from "../../../src/store/audit_anonymize.ts";
import { openTestStore, TEST_STORE_NAME } from "../../_helpers/store.ts";

const AWKWARD = [
  'a "quoted" action',
  "back\\slash\\",
  "comma, and {braces}",
  "  spaces  ",
  "NULL",
  "",
  "ünïcødé ✓",
];

Deno.test({
  name: "[postgres] toTextArray() is read back as the same elements, in order",
  ignore: TEST_STORE_NAME !== "postgres",
  sanitizeResources: false,
  async fn() {
    await using db = await openTestStore();
    const sql = openPostgresClient(parseStoreUrl(db.path) as PostgresLocation, { max: 1 });
    try {
      for (const values of [AWKWARD, [...AUDIT_ADDRESS_DETAIL_ACTIONS], ["one"], []]) {
        const rows = await sql.unsafe<{ value: string | null }[]>(
          "SELECT unnest($1::text[]) AS value",
          [toTextArray(values)],
        );
        assert.deepEqual(rows.map((row) => row.value), values);
      }
    } finally {
      await sql.end();
    }
  },
});
