/**
 * The token janitor as a part of the server's lifecycle, and whose turn its
 * sweep is when N instances share one database.
 *
 * @module
 */
import { createJanitor, JANITOR_INTERVAL_MS } from "../auth/janitor.ts";
import type { Config } from "../config/settings.ts";
import { systemClock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { PostgresDiagnostics } from "../store/postgres/open_postgres_store.ts";
import type { Store } from "../store/store.ts";

/** What the janitor sweeps with. */
export interface JanitorServices {
  store: Store;
  logger: Logger;
  metrics: Metrics;
  /** PostgreSQL's leases (`OpenedStore.postgres`), to take turns with other instances. */
  leases?: JanitorLeases;
}

/** The leases the janitor's turn is taken with. */
export type JanitorLeases = Pick<PostgresDiagnostics, "claimLease" | "releaseLease">;

/**
 * Starts the janitor (a sweep now, then every interval); disposing it waits for a sweep in
 * progress to end at its next batch and gives up its turn (PostgreSQL's lease), so that another
 * instance sweeps next without waiting for the lease to expire.
 */
export function startJanitor(config: Config, services: JanitorServices): AsyncDisposable {
  const { store, logger } = services;
  const turn = claimJanitorTurn(services.leases);
  const janitor = createJanitor({
    store,
    clock: systemClock,
    logger,
    metrics: services.metrics,
    retentionSeconds: config.tokenRetentionSeconds,
    auditRetentionSeconds: config.auditRetentionSeconds,
    unverifiedTtlSeconds: config.portalUnverifiedTtlSeconds,
    claimTurn: turn?.claim,
  });
  janitor.start();
  return {
    async [Symbol.asyncDispose]() {
      await janitor.stop();
      await turn?.release().catch((error) =>
        logger.warn("janitor lease not released", { error: String(error) })
      );
    },
  };
}

/** This instance's turn at the janitor's sweep. */
export interface JanitorTurn {
  /** Takes or renews the turn; resolves to whether this instance holds it. */
  claim(now: number): Promise<boolean>;
  /** Gives the turn up, if this instance holds it. */
  release(): Promise<void>;
}

/**
 * The janitor's turn on PostgreSQL: a lease that outlives two sweep
 * intervals, so one instance sweeps at a time; `undefined` on SQLite, where
 * the one process always may.
 */
export function claimJanitorTurn(leases: JanitorLeases | undefined): JanitorTurn | undefined {
  if (leases === undefined) return undefined;
  // This process, as the holder of the lease.
  const holder = `${Deno.hostname()}:${Deno.pid}:${crypto.randomUUID().slice(0, 8)}`;
  return {
    claim: (now) =>
      leases.claimLease({ name: "janitor", holder, now, ttlMs: 2 * JANITOR_INTERVAL_MS }),
    release: () => leases.releaseLease({ name: "janitor", holder }),
  };
}
