/**
 * runTransaction() and commitAfter() against a stand-in for postgres.js (no database): what a
 * transaction does after each way its pipelined `COMMIT AND CHAIN` can fail. A COMMIT that failed
 * as a commit (a deferred constraint: SQLSTATE 23505) ended the transaction and gave the
 * connection back to the pool, so nothing more may be sent (no ROLLBACK); a COMMIT refused as a
 * statement (a syntax error, 42601, or a feature not supported, 0A000: an engine without
 * `AND CHAIN`) ended nothing, so begin's ROLLBACK must still end the open, aborted transaction,
 * or its connection would stay reserved for good.
 *
 * @module
 */
import assert from "node:assert/strict";
import type postgres from "postgres";
import { commitAfter, runTransaction } from "../../src/store/postgres/transaction.ts";

/** A pool whose `begin` runs the callback on a stand-in transaction, as postgres.js does. */
function standInPool(commitError: Error) {
  const seen = { rolledBack: false, statements: [] as string[] };
  const tx = ((strings: TemplateStringsArray) => {
    const text = strings.join("?");
    seen.statements.push(text);
    return text === "COMMIT AND CHAIN" ? Promise.reject(commitError) : Promise.resolve([]);
  }) as unknown as postgres.TransactionSql;
  const sql = {
    async begin(fn: (tx: postgres.TransactionSql) => Promise<unknown>) {
      try {
        return await fn(tx);
      } catch (error) {
        seen.rolledBack = true; // postgres.js sends ROLLBACK here
        throw error;
      }
    },
  } as unknown as postgres.Sql;
  return { sql, seen };
}

function sqlError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

Deno.test("a COMMIT refused as a statement (42601, 0A000) is rolled back by begin, not abandoned", async () => {
  for (const code of ["42601", "0A000"]) {
    const refused = sqlError(code, "COMMIT AND CHAIN is not understood here");
    const { sql, seen } = standInPool(refused);
    await assert.rejects(
      runTransaction(sql, (tx) => commitAfter(tx, [tx`UPDATE grant_epoch SET epoch = epoch + 1`])),
      (error) => error === refused,
    );
    assert.equal(seen.rolledBack, true, `${code}: begin's ROLLBACK ends the aborted transaction`);
    assert.deepEqual(seen.statements, [
      "UPDATE grant_epoch SET epoch = epoch + 1",
      "COMMIT AND CHAIN",
    ]);
  }
});

Deno.test("a COMMIT that failed as a commit (23505) ended the transaction: nothing more is sent", async () => {
  const failed = sqlError("23505", "duplicate key value violates unique constraint");
  const { sql, seen } = standInPool(failed);
  await assert.rejects(
    runTransaction(sql, (tx) => commitAfter(tx, [tx`UPDATE grant_epoch SET epoch = epoch + 1`])),
    (error) => error === failed,
  );
  assert.equal(seen.rolledBack, false, "no ROLLBACK on a connection the pool has taken back");
});
