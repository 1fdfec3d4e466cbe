/**
 * Transactions on the pool, as the write path runs them: a COMMIT sent right behind a
 * transaction's last statements ({@link commitAfter}), and a transaction that sends nothing more
 * on a connection it has lost ({@link runTransaction}).
 *
 * @module
 */
import type postgres from "postgres";
import { isConnectionLost } from "./errors.ts";

/** Transactions that {@link commitAfter} committed (their chained successor is empty). */
const committedEarly = new WeakSet<postgres.TransactionSql>();

/**
 * Sends `statements` (a transaction's last, in order) and, right behind them on the same
 * connection without waiting for their answers, `COMMIT AND CHAIN`; resolves to their results
 * once the server has answered them all and the commit is durable (as `synchronous_commit` says).
 *
 * So the locks the statements take (the grant_epoch row's above all) are held for the server's
 * commit alone, not also for the answer's round trip to this process and the COMMIT's back. If
 * a statement fails, PostgreSQL answers the COMMIT with a rollback (no error of its own): the
 * call rejects with the statement's error and nothing is committed. If the COMMIT itself fails
 * (a deferred constraint, a serialization failure), the call rejects with that. `AND CHAIN`
 * opens an empty transaction in its place, which `sql.begin` then ends with its own COMMIT: no
 * lock, no flush, no warning (a bare COMMIT here would make `begin`'s a "no transaction in
 * progress" warning in the server's log on every write).
 *
 * postgres.js (3.4.9) writes a query to the socket at once when the connection is not waiting
 * on an earlier one's parse (a statement's first run on a connection is parsed and described
 * before it is sent: that once, the COMMIT follows its answer).
 */
export async function commitAfter<T extends readonly Promise<unknown>[]>(
  tx: postgres.TransactionSql,
  statements: [...T],
): Promise<{ [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.all([...statements, tx`COMMIT AND CHAIN`]);
  const commit = results.pop() as postgres.RowList<postgres.Row[]>;
  // Only a failed statement turns the COMMIT into a ROLLBACK, and it rejected above.
  if (commit.command !== "COMMIT") throw new Error(`The commit ended as ${commit.command}`);
  committedEarly.add(tx);
  return results as { [K in keyof T]: Awaited<T[K]> };
}

/**
 * Runs `fn` in a transaction (`sql.begin`) that never sends a statement on a connection it has
 * lost. postgres.js (3.4.9) answers a callback that rejects with a ROLLBACK, sent even when the
 * rejection was the connection closing: on the closed connection that write throws an uncaught
 * TypeError (its socket is gone) and leaves the pool's next query on that connection pending.
 * So a callback whose statement failed because the connection was lost never settles: the
 * transaction rejects at once with that error instead (and `begin`, told of the close, with it).
 *
 * When `fn` committed its own transaction ({@link commitAfter}), `onCommitted` is called at
 * once, before `begin` ends the empty chained transaction; and if that end fails (the
 * connection lost just then), the transaction still resolves to `fn`'s value: it committed.
 */
export async function runTransaction<T>(
  sql: postgres.Sql,
  fn: (tx: postgres.TransactionSql) => Promise<T>,
  onCommitted?: () => void,
): Promise<T> {
  let committed: { value: T } | undefined;
  let lose!: (error: unknown) => void;
  const lost = new Promise<never>((_, reject) => (lose = reject));
  const begun = sql.begin(async (tx) => {
    try {
      const value = await fn(tx);
      if (committedEarly.has(tx)) {
        committed = { value };
        onCommitted?.();
      }
      return value;
    } catch (error) {
      if (!isConnectionLost(error)) throw error;
      lose(error);
      return new Promise<never>(() => {}); // no ROLLBACK on the lost connection
    }
  });
  begun.catch(() => {}); // it may lose the race below
  try {
    return await Promise.race([begun as Promise<T>, lost]);
  } catch (error) {
    if (committed !== undefined) return committed.value;
    throw error;
  }
}
