/**
 * toTextArray(): the `text[]` literal the anonymisation's reads pass their actions in (so the
 * planner sees the elements: tests/store/audit_anonymize_plan_test.ts), read back by PostgreSQL
 * element for element, whatever a value holds.
 *
 * @module
 */
import assert from "node:assert/strict";
import { toTextArray } from "../../../src/store/postgres/audit_anonymize.ts";
import { AUDIT_ADDRESS_DETAIL_ACTIONS } from "../../../src/store/audit_anonymize.ts";
import { testOnPostgres } from "../../_helpers/postgres_raw.ts";

const AWKWARD = [
  'a "quoted" action',
  "back\\slash\\",
  "comma, and {braces}",
  "  spaces  ",
  "NULL",
  "",
  "ünïcødé ✓",
];

testOnPostgres(
  "[postgres] toTextArray() is read back as the same elements, in order",
  async (sql) => {
    for (const values of [AWKWARD, [...AUDIT_ADDRESS_DETAIL_ACTIONS], ["one"], []]) {
      const rows = await sql.unsafe<{ value: string | null }[]>(
        "SELECT unnest($1::text[]) AS value",
        [toTextArray(values)],
      );
      assert.deepEqual(rows.map((row) => row.value), values);
    }
  },
);
