/**
 * Waiting, in a PostgreSQL race test, until the writers it holds open are blocked on a lock
 * (seen in `pg_stat_activity`), with a deadline so that a writer that took no lock fails the
 * test instead of hanging it.
 *
 * @module
 */
import type postgres from "postgres";

/** How long {@link untilWaiting} waits for the writers to block: far beyond any load. */
export const WAITING_DEADLINE_MS = 60_000;

/**
 * Resolves once `count` sessions of this database wait for a lock.
 * @throws {Error} when they do not within {@link WAITING_DEADLINE_MS} (a writer that took no
 * lock, or failed first): the test fails instead of hanging.
 */
export async function untilWaiting(sql: postgres.Sql, count: number): Promise<void> {
  const deadline = Date.now() + WAITING_DEADLINE_MS;
  for (;;) {
    const [row] = await sql<{ waiting: number }[]>`SELECT count(*)::int AS waiting
      FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`;
    if (row.waiting >= count) return;
    if (Date.now() > deadline) {
      throw new Error(`${row.waiting} sessions wait for a lock after 60 s, not ${count}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** `promise`'s outcome, handled from the start (a writer may fail before the test awaits it). */
export function settle<T>(promise: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  return promise.then((value) => ({ value }), (error: unknown) => ({ error }));
}

/**
 * Resolves to `writer`'s value once it completes while `waiting` sessions (the writers the test
 * holds) wait for a lock.
 * @throws {Error} as soon as one more session waits (the writer queued behind a lock instead),
 * or with the writer's own error; or after {@link WAITING_DEADLINE_MS}.
 */
export async function completesUnblocked<T>(
  sql: postgres.Sql,
  writer: Promise<T>,
  waiting: number,
): Promise<T> {
  let outcome: { value: T } | { error: unknown } | undefined;
  void settle(writer).then((settled) => outcome = settled);
  const deadline = Date.now() + WAITING_DEADLINE_MS;
  for (;;) {
    const [row] = await sql<{ waiting: number }[]>`SELECT count(*)::int AS waiting
      FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`;
    // The outcome after the count: a writer that completed before the count was taken counts.
    if (outcome !== undefined) {
      if ("error" in outcome) throw outcome.error;
      return outcome.value;
    }
    if (row.waiting > waiting) throw new Error(`The writer waits for a lock (${row.waiting} wait)`);
    if (Date.now() > deadline) throw new Error("The writer neither completed nor waited in 60 s");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
