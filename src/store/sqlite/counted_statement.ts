/**
 * A write statement of the SQLite store that counts its calls (connection.ts): each call as run,
 * and each call that changed a row as a grant write, which evicts caches and moves the change
 * feed; and which statements are writes.
 *
 * @module
 */
import type { DatabaseSync, StatementResultingChanges, StatementSync } from "node:sqlite";
import type { Statement } from "./connection.ts";

/** Statements whose first word says they write. */
const WRITES = /^\s*(INSERT|UPDATE|DELETE|REPLACE)\b/i;

/** Statements whose first word leaves it open: a `WITH` clause, before a read or a write. */
const COMMON_TABLE = /^\s*WITH\b/i;

/**
 * Whether `text` writes: its first word says so, or, for a statement that starts with `WITH`
 * (a `SELECT` or an `INSERT`, `UPDATE`, `DELETE` or `REPLACE` may follow), its program opens a
 * write transaction. node:sqlite does not expose `sqlite3_stmt_readonly`; the `Transaction`
 * instruction of the statement's `EXPLAIN` is what that function reads (its second operand is
 * non-zero for a write), so the answer is SQLite's own, not a parse of the text.
 */
export function isWriteStatement(db: DatabaseSync, text: string): boolean {
  if (WRITES.test(text)) return true;
  if (!COMMON_TABLE.test(text)) return false;
  const program = db.prepare(`EXPLAIN ${text}`).all() as { opcode: string; p2: number }[];
  return program.some((step) => step.opcode === "Transaction" && Number(step.p2) !== 0);
}

/**
 * Wraps a write statement so that each call counts as run (`ran`) and each call that changes a
 * row counts as a grant write (`changed`). The three methods take the same parameters as the
 * statement's own (named or positional).
 */
export function toCountedStatement(
  statement: StatementSync,
  count: { ran(): void; changed(): void },
): Statement {
  const counted = {
    run(...args: unknown[]) {
      const result: StatementResultingChanges = Reflect.apply(statement.run, statement, args);
      count.ran();
      if (Number(result.changes) > 0) count.changed();
      return result;
    },
    get(...args: unknown[]) {
      const row = Reflect.apply(statement.get, statement, args);
      count.ran();
      if (row !== undefined) count.changed(); // RETURNING: a row came back, so one changed
      return row;
    },
    all(...args: unknown[]) {
      const rows: unknown[] = Reflect.apply(statement.all, statement, args);
      count.ran();
      if (rows.length > 0) count.changed();
      return rows;
    },
  };
  return counted as unknown as Statement;
}
