/**
 * Deadlines for many short operations on one timer.
 *
 * A timer of its own for each request body (set, then cleared a few
 * microseconds later) was a tenth of an introspection request's CPU time.
 * Here every pending deadline sits in one set, and one timer, running only
 * while the set is not empty, rejects those whose time has passed: a
 * deadline costs a set entry and a promise, and fires at most
 * {@link DEADLINE_TICK_MS} late. The timer is unreferenced: a pending
 * deadline alone does not keep a process alive (a server's listener does).
 *
 * @module
 */

/** How often the shared timer looks for deadlines that passed. */
export const DEADLINE_TICK_MS = 25;

interface Pending {
  at: number;
  reject: (error: unknown) => void;
  error: () => unknown;
}

const pending = new Set<Pending>();
let ticker: ReturnType<typeof setInterval> | undefined;

function tick(): void {
  const now = performance.now();
  for (const entry of pending) {
    if (entry.at > now) continue;
    pending.delete(entry);
    entry.reject(entry.error());
  }
  if (pending.size === 0) {
    clearInterval(ticker);
    ticker = undefined;
  }
}

/**
 * `work`, or the rejection `error()` once `ms` milliseconds have passed
 * (at most {@link DEADLINE_TICK_MS} later), whichever comes first. The work
 * itself is not cancelled; a rejection it gives after the deadline is
 * ignored.
 */
export function withDeadline<T>(work: Promise<T>, ms: number, error: () => unknown): Promise<T> {
  let entry: Pending | undefined;
  const expired = new Promise<never>((_, reject) => {
    entry = { at: performance.now() + ms, reject, error };
  });
  pending.add(entry!);
  if (ticker === undefined) {
    const started = setInterval(tick, DEADLINE_TICK_MS);
    // Pending deadlines never keep the process alive on their own.
    Deno.unrefTimer(started);
    ticker = started;
  }
  return Promise.race([work, expired]).finally(() => pending.delete(entry!));
}
