/**
 * A deletion's anonymization reads the audit log through indexes, never by a scan of every row
 * since the user's first (src/store/audit_anonymize.ts), on the backend `KEYGATE_TEST_STORE`
 * names: SQLite's `EXPLAIN QUERY PLAN` of each statement, and PostgreSQL's `EXPLAIN` over a log
 * of 100,000 rows (seeded in one statement, analysed, so the planner weighs real sizes).
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  AUDIT_ADDRESS_DETAIL_ACTIONS,
  AUDIT_HOLD_STARTS,
} from "../../src/store/audit_anonymize.ts";
import { AUDIT_ANONYMIZE_SQL as SQLITE_SQL } from "../../src/store/sqlite/audit_anonymize.ts";
import {
  AUDIT_ANONYMIZE_SQL as POSTGRES_SQL,
  toTextArray,
} from "../../src/store/postgres/audit_anonymize.ts";
import { testOnPostgres } from "../_helpers/postgres_raw.ts";
import { openTestStore, TEST_STORE_NAME } from "../_helpers/store.ts";

const ROWS = 100_000;
const ADDRESS = "u7@example.org";
const QUOTED = JSON.stringify(ADDRESS);

/**
 * Which index each statement must read through (on PostgreSQL, a hold's start may be read by
 * either key of its condition, whichever the statistics find narrower).
 */
const INDEX_OF: Record<string, string> = {
  holdStart: "audit_log_by_subject",
  subjectRows: "audit_log_by_subject",
  detailRows: "audit_log_by_action_id",
  actorRows: "audit_log_by_actor",
};

Deno.test({
  name: "[audit anonymize: sqlite] every read of the walk goes through its index",
  ignore: TEST_STORE_NAME !== "sqlite",
  async fn() {
    await using db = await openTestStore();
    const raw = new DatabaseSync(db.path);
    try {
      const params: Record<string, Record<string, string | number>> = {
        holdStart: { subject: `user:${ADDRESS}`, until_id: 10, actions: "[]" },
        subjectRows: { subject: `user:${ADDRESS}`, from_id: 1, until_id: 10 },
        detailRows: {
          actions: JSON.stringify(AUDIT_ADDRESS_DETAIL_ACTIONS),
          from_id: 1,
          until_id: 10,
          quoted: QUOTED,
        },
        actorRows: { actor: "portal:user:7", from_id: 1 },
      };
      for (const [name, text] of Object.entries(SQLITE_SQL)) {
        const plan = (raw.prepare(`EXPLAIN QUERY PLAN ${text}`).all(params[name]) as {
          detail: string;
        }[]).map((row) => row.detail);
        const steps = plan.filter((step) => / audit_log\b/.test(step));
        assert.deepEqual(
          steps.map((step) => step.replace(/ \(.*$/, "")),
          [`SEARCH audit_log USING INDEX ${INDEX_OF[name]}`],
          `${name}: ${plan.join("; ")}`,
        );
        if (name === "detailRows") {
          // The id range bounds the search in each action's entries: not every row of them.
          assert.match(steps[0], /\(action=\? AND id>\? AND id<\?\)$/, steps[0]);
        }
      }
    } finally {
      raw.close();
    }
  },
});

/** `n` rows: logins of 5000 users, some keys made and tokens revoked naming a user. */
const SEED = `INSERT INTO audit_log (at, actor, action, subject, detail)
  SELECT 1000 + n, 'api_key:' || (n % 1000),
    CASE WHEN n % 50 = 0 THEN 'key.created' WHEN n % 97 = 0 THEN 'token.revoked'
      ELSE 'token.issued' END,
    CASE WHEN n % 50 = 0 OR n % 97 = 0 THEN 'api_key:' || n
      ELSE 'user:u' || (n % 5000) || '@example.org' END,
    CASE WHEN n % 50 = 0 OR n % 97 = 0
      THEN jsonb_build_object('user', 'u' || (n % 5000) || '@example.org')
      ELSE '{}'::jsonb END
  FROM generate_series(1, ${ROWS}) AS n`;

testOnPostgres(
  "[audit anonymize: postgres] every read of the walk goes through its index",
  async (sql) => {
    await sql.unsafe(SEED);
    await sql.unsafe("ANALYZE audit_log");
    const params: Record<string, unknown[]> = {
      holdStart: [`user:${ADDRESS}`, Number.MAX_SAFE_INTEGER, toTextArray(AUDIT_HOLD_STARTS)],
      subjectRows: [`user:${ADDRESS}`, 1, Number.MAX_SAFE_INTEGER],
      detailRows: [toTextArray(AUDIT_ADDRESS_DETAIL_ACTIONS), 1, Number.MAX_SAFE_INTEGER, QUOTED],
      actorRows: ["portal:user:7", 1],
    };
    for (const [name, text] of Object.entries(POSTGRES_SQL)) {
      const rows = await sql.unsafe(`EXPLAIN ${text}`, params[name] as never[]);
      const plan = rows.map((row) => row["QUERY PLAN"] as string).join("\n");
      const index = name === "holdStart" ? "audit_log_by_(subject|action)" : INDEX_OF[name];
      assert.match(
        plan,
        new RegExp(`Index (Only )?Scan using ${index}|Bitmap Index Scan on ${index}`),
        `${name}:\n${plan}`,
      );
      assert.doesNotMatch(plan, /Seq Scan on audit_log/, `${name}:\n${plan}`);
      if (name === "detailRows") {
        // The id range is an index condition (bounds the search), not a filter on its rows.
        assert.match(plan, /Index Cond: \(\(action = ANY .*\(id >= .*\(id < /, plan);
      }
    }
  },
);
