/**
 * Whose turn the janitor's sweep is, when N instances share one database.
 *
 * @module
 */
import { JANITOR_INTERVAL_MS } from "../auth/janitor.ts";
import { findPostgresStore } from "../store/open_store.ts";
import type { Store } from "../store/store.ts";

/**
 * The janitor's turn on PostgreSQL: a lease that outlives two sweep
 * intervals, so one instance sweeps at a time; `undefined` on SQLite, where
 * the one process always may.
 */
export function claimJanitorTurn(store: Store): ((now: number) => Promise<boolean>) | undefined {
  const postgres = findPostgresStore(store);
  if (postgres === undefined) return undefined;
  // This process, as the holder of the lease.
  const holder = `${Deno.hostname()}:${Deno.pid}:${crypto.randomUUID().slice(0, 8)}`;
  return (now) =>
    postgres.claimLease({
      name: "janitor",
      holder,
      now,
      ttlMs: 2 * JANITOR_INTERVAL_MS,
    });
}
