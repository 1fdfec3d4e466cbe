/**
 * A write statement of the SQLite store that counts its calls (connection.ts): each call as run,
 * and each call that changed a row as a grant write, which evicts caches and moves the change
 * feed.
 *
 * @module
 */
import type { StatementResultingChanges, StatementSync } from "node:sqlite";
import type { Statement } from "./connection.ts";

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
