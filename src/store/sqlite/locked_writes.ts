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
 * @module
 */
import { isDatabaseBusy } from "../../http/errors.ts";
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
      return store.withoutBusyWait(write);
    } catch (error) {
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
