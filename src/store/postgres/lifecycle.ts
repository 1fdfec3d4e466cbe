/**
 * {@link LifecycleStore} on PostgreSQL: readiness (a round trip within a bound, and a
 * confirmed grant epoch), the write-failure probe, closing the watcher and the pool.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreError, StoreUnavailable } from "../errors.ts";
import type { LifecycleStore } from "../store.ts";
import type { PgContext } from "./db.ts";
import { guard } from "./errors.ts";
import type { GrantEpochWatcher } from "./grant_epoch.ts";

/** Milliseconds `checkStoreReady` waits for its round trip. */
const READY_TIMEOUT_MS = 2000;

/** What the lifecycle group works on; `closing.closed` is also the context's `isClosed`. */
export interface LifecycleStoreDeps {
  sql: postgres.Sql;
  db: PgContext;
  watcher: GrantEpochWatcher;
  closing: { closed: boolean };
}

export function createLifecycleStore(deps: LifecycleStoreDeps): LifecycleStore {
  const { sql, db, watcher, closing } = deps;
  return {
    async checkStoreReady() {
      if (closing.closed) throw new StoreError("The store is closed");
      // Not ready while the secure path fails closed, even if one query gets through.
      if (watcher.read() === undefined) return false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const roundTrip = guard(() => sql`SELECT 1 AS ok`).then(([row]) => row?.ok === 1);
      roundTrip.catch(() => {}); // may lose the race below: never an unhandled rejection
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new StoreUnavailable("The database did not answer the readiness check")),
          READY_TIMEOUT_MS,
        );
      });
      try {
        return await Promise.race([roundTrip, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },

    findWriteFailure: () => db.findWriteFailure(),

    async closeStore() {
      if (closing.closed) return;
      closing.closed = true;
      await watcher.close();
      await sql.end({ timeout: 1 });
    },
  };
}
