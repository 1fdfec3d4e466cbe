/**
 * Transactions on the pool, as the write path runs them: a COMMIT sent right behind a
 * transaction's last statements ({@link commitAfter}), and a transaction that sends nothing more
 * on a connection it has lost, or that its failed COMMIT gave back to the pool
 * ({@link runTransaction}).
 *
 * @module
 */
import type postgres from "postgres";
import { StoreUnavailable } from "../errors.ts";
import { isConnectionLost } from "./errors.ts";

/** Transactions that {@link commitAfter} committed (their chained successor is empty). */
const committedEarly = new WeakSet<postgres.TransactionSql>();

/**
 * Transactions whose COMMIT failed in {@link commitAfter} after their statements succeeded: the
 * server ended them and opened no chained one, and postgres.js handed the connection back to
 * the pool. Nothing more may be sent on them (see {@link runTransaction}).
 */
const endedByCommit = new WeakSet<postgres.TransactionSql>();

/** SQLSTATE classes of a statement the server refused before running it. */
const REFUSED_STATEMENT_CLASSES = new Set(["42", "0A"]);

/** Whether `error` is the server refusing a statement as such (it ran nothing, ended nothing). */
function isRefusedStatement(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && REFUSED_STATEMENT_CLASSES.has(code.slice(0, 2));
}

/**
 * Sends `statements` (a transaction's last, in order) and, right behind them on the same
 * connection without waiting for their answers, `COMMIT AND CHAIN`; resolves to their results
 * once the server has answered them all and the commit is durable (as `synchronous_commit` says).
 *
 * So the locks the statements take (the grant_epoch row's above all) are held for the server's
 * commit alone, not also for the answer's round trip to this process and the COMMIT's back.
 * `AND CHAIN` opens an empty transaction in its place, which `sql.begin` then ends with its own
 * COMMIT: no lock, no flush, no warning (a bare COMMIT here would make `begin`'s a "no
 * transaction in progress" warning in the server's log on every write).
 *
 * It waits for every answer before it settles. If a statement fails, PostgreSQL answers the
 * COMMIT with a rollback and still opens the chained transaction (for `begin` to roll back): the
 * call rejects with the statement's error and nothing is committed. If the COMMIT itself fails
 * (a deferred constraint, a serialization failure, too many notifications queued), the server
 * has ended the transaction and opened none: the session is idle, and postgres.js (3.4.9) has
 * already given the connection to the pool's next query. The call rejects with the COMMIT's
 * error and marks `tx` as ended, so that {@link runTransaction} sends nothing more on it.
 *
 * postgres.js writes a query to the socket at once when the connection is not waiting on an
 * earlier one's parse (a statement's first run on a connection is parsed and described before
 * it is sent: that once, the COMMIT follows its answer).
 */
export async function commitAfter<T extends readonly Promise<unknown>[]>(
  tx: postgres.TransactionSql,
  statements: [...T],
): Promise<{ [K in keyof T]: Awaited<T[K]> }> {
  const outcomes = await Promise.allSettled([...statements, tx`COMMIT AND CHAIN`]);
  const commit = outcomes.pop()!;
  const failed = outcomes.find((outcome): outcome is PromiseRejectedResult =>
    outcome.status === "rejected"
  );
  // The chained transaction exists (the COMMIT rolled back): begin's ROLLBACK ends it.
  if (failed !== undefined) throw failed.reason;
  if (commit.status === "rejected") {
    // Refused as a statement (a syntax error, a feature not supported: an engine without
    // `AND CHAIN`), the COMMIT ended nothing: the transaction is open and aborted, and the
    // connection still this transaction's, for begin's ROLLBACK. Any other failure was the
    // commit's own, and ended the transaction.
    if (!isRefusedStatement(commit.reason)) endedByCommit.add(tx);
    throw commit.reason;
  }
  const { command } = commit.value as postgres.RowList<postgres.Row[]>;
  if (command !== "COMMIT") {
    // Every statement succeeded, yet the COMMIT rolled back: postgres.js re-sent a statement
    // that failed as a prepared one (its plan gone stale) behind the COMMIT, which the failure
    // had already turned into a ROLLBACK; the re-sent one ran in the chained transaction,
    // which begin's ROLLBACK ends. Nothing was committed: the write may be tried again. (The
    // statement's first error is not to be had: postgres.js drops it when the re-send works.)
    throw new StoreUnavailable(
      `Database busy: try again: the commit ended as "${command}" (a statement was re-sent)`,
    );
  }
  committedEarly.add(tx);
  return outcomes.map((outcome) => (outcome as PromiseFulfilledResult<unknown>).value) as {
    [K in keyof T]: Awaited<T[K]>;
  };
}

/**
 * Runs `fn` in a transaction (`sql.begin`) that never sends a statement on a connection it has
 * lost. postgres.js (3.4.9) answers a callback that rejects with a ROLLBACK, sent even when the
 * rejection was the connection closing: on the closed connection that write throws an uncaught
 * TypeError (its socket is gone) and leaves the pool's next query on that connection pending.
 * So a callback whose statement failed because the connection was lost never settles: the
 * transaction rejects at once with that error instead (and `begin`, told of the close, with it).
 * The same when {@link commitAfter}'s COMMIT failed: the server ended the transaction, and the
 * connection is back in the pool, perhaps already another transaction's; `begin`'s ROLLBACK on
 * it would end up in that transaction, or in a queue nothing reads (and never settle). The
 * callback never settles either, and the transaction rejects at once. `begin`'s promise is left
 * pending: only the connection's close handler refers to it, until the connection's next
 * transaction replaces that; the connection itself is the pool's again, so no slot is lost.
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
    // Invariant: `fn` awaits statements on `tx` alone. A lost-connection error from anywhere
    // else would be taken for this connection's, and leave its transaction open (no ROLLBACK).
    try {
      const value = await fn(tx);
      if (committedEarly.has(tx)) {
        committed = { value };
        onCommitted?.();
      }
      return value;
    } catch (error) {
      if (!endedByCommit.has(tx) && !isConnectionLost(error)) throw error;
      lose(error);
      return new Promise<never>(() => {}); // no ROLLBACK on a connection no longer ours
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
