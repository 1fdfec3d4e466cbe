/**
 * A store condition the process cannot recover from while it runs: a failed WAL sync of the
 * SQLite store (src/store/sqlite/wal_sync.ts), whose commits may be lost although they were
 * applied. The store then refuses every write; the server stops as after SIGTERM (draining what
 * is in flight, closing every part) and exits with status 1, so that its supervisor restarts it
 * and SQLite recovers the database from what the -wal file really holds. With `--workers`, a
 * request worker's store reports to the main thread (src/server/worker_spawn.ts): the whole
 * server stops, not one worker.
 *
 * @module
 */
import type { Logger } from "../platform/logger.ts";

/** The exit status of a server stopped by {@link FatalStop}. */
export const FATAL_EXIT_CODE = 1;

/** Raised once by whatever part of the process hits a fatal store condition. */
export interface FatalStop {
  /** Resolves at the first {@link FatalStop.raise}. */
  readonly requested: Promise<void>;
  /** Whether it was raised. */
  raised(): boolean;
  /** Logs `reason` once (the first call) and resolves {@link FatalStop.requested}. */
  raise(reason: string): void;
}

/** Creates the process's fatal stop; its one log line is an error naming the reason. */
export function createFatalStop(logger: Logger): FatalStop {
  let resolve!: () => void;
  const requested = new Promise<void>((done) => resolve = done);
  let raised = false;
  return {
    requested,
    raised: () => raised,
    raise(reason) {
      if (raised) return;
      raised = true;
      logger.error("store failed: stopping, restart keygate to recover the database", {
        event: "store_fatal",
        error: reason,
        exit_code: FATAL_EXIT_CODE,
      });
      resolve();
    },
  };
}
