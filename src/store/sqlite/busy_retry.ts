/**
 * Writes that wait for another connection's write lock without blocking the
 * event loop.
 *
 * `node:sqlite` is synchronous, so SQLite's own busy wait would freeze the
 * whole server (secure requests included) for up to the busy timeout on every
 * write that meets a lock held by another process (the admin CLI, a backup).
 * Instead, each attempt runs with the busy wait off, and a locked attempt is
 * retried after a short pause, during which other requests are served. After
 * the busy timeout the last SQLITE_BUSY is thrown (the store turns it into
 * `StoreUnavailable`, which becomes 503).
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { nextTask } from "../../platform/next_task.ts";
import { isDatabaseBusy } from "./errors.ts";

/** First pause between attempts, in ms; it doubles up to {@link MAX_PAUSE_MS}. */
const FIRST_PAUSE_MS = 2;
const MAX_PAUSE_MS = 50;

/** What {@link writeWhenUnlocked} needs of a connection. */
export interface BusyRetryTarget {
  /** How long to keep retrying, in ms. */
  busyTimeoutMs: number;
  /** Runs `fn` with SQLite's busy wait off. */
  withoutBusyWait<T>(fn: () => T): T;
}

/**
 * Runs the synchronous write `write`, retrying while the database is locked
 * by another connection, for at most `target.busyTimeoutMs`.
 *
 * @throws the last SQLITE_BUSY once the time is up; any other error at once.
 */
export async function writeWhenUnlocked<T>(target: BusyRetryTarget, write: () => T): Promise<T> {
  const deadline = performance.now() + target.busyTimeoutMs;
  let pause = FIRST_PAUSE_MS;
  while (true) {
    try {
      return target.withoutBusyWait(write);
    } catch (error) {
      if (!isDatabaseBusy(error) || performance.now() + pause > deadline) throw error;
    }
    await nextTask(pause);
    pause = Math.min(pause * 2, MAX_PAUSE_MS);
  }
}

/** Runs `fn` with the connection's busy wait off, then restores `busyTimeoutMs`. */
export function runWithoutBusyWait<T>(db: DatabaseSync, busyTimeoutMs: number, fn: () => T): T {
  db.exec("PRAGMA busy_timeout = 0");
  try {
    return fn();
  } finally {
    db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  }
}
