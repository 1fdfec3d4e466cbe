/**
 * The janitor's batch finds ended tokens through indexes, never by a walk of the token table
 * (`ENDED_TOKEN_IDS` in src/store/sqlite/rules.ts and src/store/postgres/rows.ts), on the
 * backend `KEYGATE_TEST_STORE` names, over 100,000 tokens of which 1% ended in each way, beside
 * the history that piles up (half the keys ended, 30% of the users cut off), with statistics
 * gathered (`ANALYZE`) so that the planners weigh real sizes: SQLite's `EXPLAIN QUERY PLAN` and
 * PostgreSQL's `EXPLAIN` of the batch's `DELETE`. Then the batches, run until one deletes none,
 * must delete exactly the rows the rule itself (`TOKEN_ENDED_AT`, row by row) says ended.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { DELETE_ENDED_TOKENS } from "../../src/store/postgres/retention.ts";
import { TOKEN_ENDED_AT as POSTGRES_RULE } from "../../src/store/postgres/rows.ts";
import { EVER } from "../../src/store/rows.ts";
import {
  ENDED_TOKEN_IDS as SQLITE_ENDED,
  TOKEN_ENDED_AT as SQLITE_RULE,
} from "../../src/store/sqlite/rules.ts";
import { testOnPostgres } from "../_helpers/postgres_raw.ts";
import { openTestStore, TEST_STORE_NAME } from "../_helpers/store.ts";

const TOKENS = 100_000;
const USERS = 1000;
/** The batch's cutoff: the rows below ended at 5,000, the others never before 10⁹. */
const CUTOFF = 10_000;

/** A numbers source `s(n)` of 1 to `count`, for a FROM clause. */
type Numbers = (count: number) => string;

/**
 * Users, keys and tokens, written in the same SQL on both backends from a numbers source `s(n)`:
 * - of every 100 tokens, one expired, one revoked, one of a revoked key, one of a user cut off
 *   after it was issued and one of an expired key (users and keys `n % 100` = 2, 3 and 4; token `n`
 *   is of user and key `(n - 1) % 1000 + 1`, which is `n` modulo 100): 5,000 ended;
 * - no end by the cutoff: one of a user cut off only after it (`n % 100 = 7`), one of a disabled
 *   key, one of a disabled user (8 and 9);
 * - history, which a sweep must not read the token table for: 30% of the users were cut off
 *   before their tokens were issued (`n % 10` in 4, 5, 6), and as many keys as the live ones ended
 *   with no token left (each key rotated once, its tokens long purged).
 */
const SEED = [
  (numbers: Numbers) =>
    `INSERT INTO users (email, password_hash, created_at, disabled, updated_at, tokens_valid_from)
     SELECT 'u' || n || '@example.org', 'x', 100, CASE WHEN n % 100 = 9 THEN 1 ELSE 0 END,
       CASE WHEN n % 100 = 3 OR n % 10 IN (4, 5, 6) THEN 5000 WHEN n % 100 = 7 THEN 20000
         ELSE 100 END,
       CASE WHEN n % 100 IN (3, 7) THEN 1500 WHEN n % 10 IN (4, 5, 6) THEN 900 ELSE 0 END
     FROM ${numbers(USERS)}`,
  (numbers: Numbers) =>
    `INSERT INTO api_keys (key_hash, prefix, user_id, created_at, revoked_at, expires_at, disabled_at)
     SELECT HASH('k' || n), 'k', n, 100, CASE WHEN n % 100 = 2 THEN 5000 END,
       CASE WHEN n % 100 = 4 THEN 5000 END, CASE WHEN n % 100 = 8 THEN 5000 END
     FROM ${numbers(USERS)}`,
  (numbers: Numbers) =>
    `INSERT INTO api_keys (key_hash, prefix, user_id, created_at, revoked_at)
     SELECT HASH('old' || n), 'o', n, 100, 200
     FROM ${numbers(USERS)}`,
  (numbers: Numbers) =>
    `INSERT INTO tokens (token_hash, user_id, api_key_id, issued_at, expires_at, revoked_at)
     SELECT HASH('t' || n), (n - 1) % ${USERS} + 1, (n - 1) % ${USERS} + 1, 1000,
       CASE WHEN n % 100 = 0 THEN 5000 ELSE 1000000000 END,
       CASE WHEN n % 100 = 1 THEN 5000 END
     FROM ${numbers(TOKENS)}`,
];

/** The ids of the tokens the rule itself says ended at or before the cutoff (`param`). */
const endedByRule = (rule: string, param: string) =>
  `SELECT t.id FROM tokens t JOIN api_keys k ON k.id = t.api_key_id JOIN users u ON u.id = t.user_id
   WHERE ${rule} <= ${param}`;

/**
 * The batches (their counts, in order) deleted exactly the rows in `ended`, at most 500 a batch,
 * and kept every other: `left` is what the token table holds afterwards.
 */
function assertExactly(ended: number[], counts: number[], left: number[]): void {
  assert.equal(ended.length, 5000, "the seed's ended rows, by the rule");
  assert.ok(counts.every((count) => count <= 500), `batches: ${counts}`);
  assert.equal(counts.at(-1), 0);
  assert.equal(counts.reduce((a, b) => a + b), ended.length);
  const gone = new Set(ended);
  assert.equal(left.filter((id) => gone.has(id)).length, 0, "no ended row left");
  assert.equal(left.length, TOKENS - ended.length, "no other row deleted");
}

/** The indexes through which the key and user legs find what ended between :since and :cutoff. */
const WINDOW_INDEXES = [
  ["k", "api_keys_by_revocation", "revoked_at"],
  ["k", "api_keys_by_expiry", "expires_at"],
  ["u", "users_by_cutoff", "updated_at"],
];

/** The index each leg must read the token table through. */
const TOKEN_INDEXES = [
  "tokens_by_expiry",
  "tokens_by_revocation",
  "tokens_by_api_key",
  "tokens_by_user_issue",
];

Deno.test({
  name: "[janitor plan: sqlite] a batch reads the token table only through its indexes",
  ignore: TEST_STORE_NAME !== "sqlite",
  async fn() {
    await using db = await openTestStore();
    const raw = new DatabaseSync(db.path);
    try {
      const numbers = (count: number) =>
        `(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${count})
          SELECT n FROM s)`;
      raw.exec("BEGIN");
      for (const statement of SEED) {
        raw.exec(statement(numbers).replaceAll(/HASH\(([^)]*)\)/g, "randomblob(32)"));
      }
      raw.exec("COMMIT");
      // Without statistics, then with them (`PRAGMA optimize` gathers them in a long-lived file).
      for (const analyzed of [false, true]) {
        if (analyzed) raw.exec("ANALYZE");
        const plan = (raw.prepare(
          `EXPLAIN QUERY PLAN DELETE FROM tokens WHERE id IN (${SQLITE_ENDED})`,
        ).all({ cutoff: CUTOFF, size: 500, since: CUTOFF - 100 }) as { detail: string }[]).map((
          row,
        ) => row.detail);
        const text = `analyzed: ${analyzed}\n${plan.join("\n")}`;
        // Five legs and the DELETE's own read by row id, each a search.
        const reads = plan.filter((step) => /^(SCAN|SEARCH) (tokens|t)\b/.test(step));
        assert.equal(reads.length, 6, text);
        for (const step of reads) assert.match(step, /^SEARCH/, text);
        for (const index of TOKEN_INDEXES) assert.match(text, new RegExp(`INDEX ${index}\\b`));
        // A user's tokens issued since the cutoff are not read: the cutoff bounds the search.
        assert.match(text, /INDEX tokens_by_user_issue \(user_id=\? AND issued_at<\?\)/, text);
        // The keys and users that ended are found by when, between :since and the cutoff: a
        // batch does not read the history before :since.
        for (const [alias, index, column] of WINDOW_INDEXES) {
          assert.match(
            text,
            new RegExp(
              `SEARCH ${alias} USING (COVERING )?INDEX ${index} \\(${column}>\\? AND ${column}<\\?\\)`,
            ),
            text,
          );
        }
        assert.doesNotMatch(text, /SCAN (k|u)\b/, text);
      }
      // And the batches delete exactly what the rule says ended, 500 at a time.
      const ids = (query: string, params: Record<string, number> = {}) =>
        (raw.prepare(query).all(params) as { id: number }[]).map((row) => row.id);
      const ended = ids(endedByRule(SQLITE_RULE, ":cutoff"), { cutoff: CUTOFF });
      const batch = raw.prepare(`DELETE FROM tokens WHERE id IN (${SQLITE_ENDED})`);
      const counts = [];
      for (let count = -1; count !== 0;) {
        count = Number(batch.run({ cutoff: CUTOFF, size: 500, since: EVER }).changes);
        counts.push(count);
      }
      assertExactly(ended, counts, ids("SELECT id FROM tokens"));
    } finally {
      raw.close();
    }
  },
});

testOnPostgres(
  "[janitor plan: postgres] a batch reads the token table only through its indexes",
  async (sql) => {
    const numbers = (count: number) => `generate_series(1, ${count}) AS s(n)`;
    for (const statement of SEED) {
      await sql.unsafe(
        statement(numbers).replaceAll(/HASH\(([^)]*)\)/g, "sha256(convert_to($1, 'UTF8'))"),
      );
    }
    await sql.unsafe("ANALYZE users, api_keys, tokens");
    // The store's own statement (retention.ts): a timed sweep's, since an instant, and a full
    // sweep's, since ever.
    const explain = async (since: number) =>
      (await sql.unsafe(`EXPLAIN ${DELETE_ENDED_TOKENS}`, [CUTOFF, 500, since]))
        .map((row) => row["QUERY PLAN"] as string).join("\n");
    const full = await explain(EVER);
    assert.doesNotMatch(full, /Seq Scan on tokens/, full);
    const plan = await explain(CUTOFF - 100);
    assert.doesNotMatch(plan, /Seq Scan on tokens/, plan);
    // The keys and users that ended are found by when, between $3 and the cutoff: a batch does
    // not read the history before $3.
    assert.doesNotMatch(plan, /Seq Scan on (api_keys|users)/, plan);
    for (const [, index] of WINDOW_INDEXES) {
      assert.match(
        plan,
        new RegExp(`Index Scan using ${index}|Bitmap Index Scan on ${index}`),
        plan,
      );
    }
    // A user's tokens issued since the cutoff are not read: the cutoff bounds the search.
    assert.match(
      plan,
      /Index Cond: \(\(user_id = u\.id\) AND \(issued_at < u\.tokens_valid_from\)\)/,
      plan,
    );
    for (const index of TOKEN_INDEXES) {
      assert.match(
        plan,
        new RegExp(`Index (Only )?Scan using ${index}|Bitmap Index Scan on ${index}`),
        plan,
      );
    }
    const ids = async (query: string, params: number[] = []) =>
      (await sql.unsafe(query, params)).map((row) => Number(row.id));
    const ended = await ids(endedByRule(POSTGRES_RULE, "$1"), [CUTOFF]);
    const counts = [];
    for (let count = -1; count !== 0;) {
      count = (await sql.unsafe(DELETE_ENDED_TOKENS, [CUTOFF, 500, EVER]))
        .filter((row) => row.id !== null).length;
      counts.push(count);
    }
    assertExactly(ended, counts, await ids("SELECT id FROM tokens"));
  },
);
