/**
 * The janitor: deletes token rows that stopped working (expired, revoked,
 * ended by their key's expiry or revocation or their user's cutoff; see
 * `Store.deleteEndedTokens`) longer ago than the retention period, in the
 * background.
 *
 * It walks the token table by row id in windows of {@link JANITOR_BATCH_ROWS}
 * ids; each window is one short `BEGIN IMMEDIATE` transaction, and the
 * janitor yields to the event loop between windows, so requests and the admin
 * CLI never wait long for the write lock. Rows are kept for the retention
 * period so that secure requests can still answer `token_expired` for a while.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { nextTask } from "../platform/next_task.ts";
import { isStoreUnavailable } from "../store/errors.ts";
import type { Store } from "../store/store.ts";

/** Row ids per transaction. */
export const JANITOR_BATCH_ROWS = 500;
/** Time between two sweeps. */
export const JANITOR_INTERVAL_MS = 10 * 60_000;

/** What {@link createJanitor} needs. */
export interface JanitorDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  metrics?: Metrics;
  /** Rows that stopped working longer ago than this are deleted. */
  retentionSeconds: number;
  batchRows?: number;
  intervalMs?: number;
  /**
   * With N instances on one database: takes (or renews) this instance's
   * turn before each timed sweep, and resolves to whether it has it; a sweep
   * whose turn another instance holds is skipped. Default: always its turn.
   */
  claimTurn?: (now: number) => Promise<boolean>;
}

/** A background sweeper; {@link Janitor.sweep} runs one sweep now. */
export interface Janitor {
  /** Deletes every row past retention, batch by batch; resolves to how many. */
  sweep(): Promise<number>;
  /** Sweeps now and then every interval until {@link Janitor.stop}. */
  start(): void;
  /** Cancels the timer and waits for a sweep in progress to end at its next batch. */
  stop(): Promise<void>;
}

/** Creates the janitor. Nothing runs until `start()` or `sweep()`. */
export function createJanitor(deps: JanitorDeps): Janitor {
  const { store, clock, logger, metrics } = deps;
  const batchRows = deps.batchRows ?? JANITOR_BATCH_ROWS;
  const intervalMs = deps.intervalMs ?? JANITOR_INTERVAL_MS;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<number> | undefined;

  async function sweepRows(): Promise<number> {
    const bounds = await store.findTokenIdRange();
    if (bounds === undefined) return 0;
    const cutoff = clock.now() - deps.retentionSeconds * 1000;
    let deleted = 0;
    for (let after = bounds.first - 1; after < bounds.last && !stopped; after += batchRows) {
      const count = await store.deleteEndedTokens({ afterId: after, size: batchRows, cutoff });
      deleted += count;
      metrics?.tokensPurged(count);
      await nextTask();
    }
    return deleted;
  }

  async function sweep(): Promise<number> {
    if (running !== undefined) return running;
    running = sweepRows();
    try {
      const deleted = await running;
      if (deleted > 0) logger.info("janitor deleted token rows", { event: "janitor", deleted });
      return deleted;
    } finally {
      running = undefined;
    }
  }

  async function tick(): Promise<void> {
    try {
      if (deps.claimTurn === undefined || await deps.claimTurn(clock.now())) await sweep();
    } catch (error) {
      metrics?.databaseError("janitor");
      logger[isStoreUnavailable(error) ? "warn" : "error"]("janitor failed", {
        event: "janitor",
        error: String(error),
      });
    }
    if (!stopped) timer = setTimeout(tick, intervalMs);
  }

  return {
    sweep,
    start() {
      stopped = false;
      timer = setTimeout(tick, 0);
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running?.catch(() => {});
    },
  };
}
