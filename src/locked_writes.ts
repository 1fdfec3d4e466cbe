/**
 * Writes from request handlers that wait for another connection's write lock
 * without blocking the event loop.
 *
 * `node:sqlite` is synchronous, so SQLite's own busy wait would freeze the
 * whole server (secure requests included) for up to the busy timeout on every
 * write that meets a lock held by another process (the admin CLI, a backup).
 * Instead, each attempt runs with the busy wait off, and a locked attempt is
 * retried after a short pause, during which other requests are served. After
 * the store's busy timeout the last SQLITE_BUSY is thrown, which becomes 503.
 *
 * Each write's outcome is noted per store, so that `/readyz` can report
 * `degraded` while writes fail for a reason a retry will not soon cure (disk
 * full, I/O error, read-only file system) and `ready` once one succeeds.
 *
 * @module
 */
import { isDatabaseBusy, isDatabaseUnavailable } from "./errors.ts";
import type { Store } from "./store.ts";

/** First pause between attempts, in ms; it doubles up to {@link MAX_PAUSE_MS}. */
const FIRST_PAUSE_MS = 2;
const MAX_PAUSE_MS = 50;

/**
 * Runs the synchronous store write `write`, retrying while the database is
 * locked by another connection, for at most `store.busyTimeoutMs`.
 *
 * @throws the last SQLITE_BUSY once the time is up; any other error at once.
 */
export async function writeWhenUnlocked<T>(store: Store, write: () => T): Promise<T> {
  const deadline = performance.now() + store.busyTimeoutMs;
  let pause = FIRST_PAUSE_MS;
  while (true) {
    try {
      const result = store.withoutBusyWait(write);
      writeFailures.delete(store);
      return result;
    } catch (error) {
      if (!isDatabaseBusy(error) && isDatabaseUnavailable(error)) {
        writeFailures.set(store, (error as Error).message.slice(0, 200));
      }
      if (!isDatabaseBusy(error) || performance.now() + pause > deadline) throw error;
    }
    await nextTask(pause);
    pause = Math.min(pause * 2, MAX_PAUSE_MS);
  }
}

/**
 * Resolves after `ms` (default 0), letting other tasks (requests) run first:
 * the pause between batches of a long write, so that none holds the thread.
 */
export function nextTask(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The last write failure per store (its SQLite message), until a write succeeds. */
const writeFailures = new WeakMap<Store, string>();

/**
 * Why writes to `store` fail (SQLite's message, such as "database or disk is
 * full"), or `undefined` when the last write succeeded. While a failure is
 * noted, it first tries a probe write ({@link Store.probeWrite}), so that
 * readiness recovers without waiting for a client's write.
 */
export function findWriteFailure(store: Store): string | undefined {
  if (!writeFailures.has(store)) return undefined;
  try {
    store.withoutBusyWait(() => store.probeWrite());
    writeFailures.delete(store);
  } catch (error) {
    if (!isDatabaseBusy(error)) writeFailures.set(store, (error as Error).message.slice(0, 200));
  }
  return writeFailures.get(store);
}
