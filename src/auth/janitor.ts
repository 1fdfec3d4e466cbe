/**
 * The janitor: deletes token rows that stopped working (expired, revoked,
 * ended by their key's expiry or revocation or their user's cutoff; see
 * `Store.deleteEndedTokens`) longer ago than the retention period, in the
 * background.
 *
 * It deletes at most {@link JANITOR_BATCH_ROWS} rows per short write
 * transaction, until a batch finds none, and yields to the event loop between
 * batches, so requests and the admin CLI never wait long for the write lock.
 * The store finds the ended rows through indexes: a sweep reads what it
 * deletes (and the ended keys and cut-off users), never the rows it keeps.
 * Rows are kept for the retention period so that secure requests can still
 * answer `token_expired` for a while.
 *
 * With an audit retention (`--audit-retention`), each sweep then deletes the
 * audit rows older than it, the oldest first, {@link JANITOR_BATCH_ROWS} per
 * transaction, and records one `audit.pruned` entry saying how many and up to
 * when, so that the log itself says where its history begins.
 *
 * With an unverified-sign-up lifetime (`--portal-unverified-ttl`), each sweep also deletes the
 * portal sign-ups still unverified that long after they were made, {@link JANITOR_BATCH_ROWS}
 * per transaction, each with one `portal.unverified_deleted` entry naming the account by a
 * random id (`user:deleted:…`), never its e-mail; the account's earlier entries take that id
 * too, in the same transaction (src/auth/user_anonymity.ts).
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { nextTask } from "../platform/next_task.ts";
import { isStoreUnavailable } from "../store/errors.ts";
import type { Store } from "../store/store.ts";
import { toAnonymizing } from "./user_anonymity.ts";

/**
 * How far before the cutoff of its last sweep that found nothing left a timed sweep looks for keys
 * and users that ended: a revocation still committing then, or written by an instance whose clock
 * is behind, carries an earlier time than the sweep's.
 */
export const JANITOR_WINDOW_MARGIN_MS = 60 * 60_000;
/** A timed sweep looks at every key and user that ever ended at a start and then this often. */
export const JANITOR_FULL_SWEEP_MS = 24 * 60 * 60_000;

/** Rows deleted per transaction (sign-ups: at most {@link UNVERIFIED_PER_WRITE}). */
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
  /** Audit rows written longer ago than this are deleted; 0 or undefined: never. */
  auditRetentionSeconds?: number;
  /** Portal sign-ups unverified this long after they were made are deleted; 0 or undefined: never. */
  unverifiedTtlSeconds?: number;
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
  /**
   * Deletes every token row past retention, batch by batch, then every audit row past the
   * audit retention; resolves to how many token rows.
   */
  sweep(): Promise<number>;
  /** Sweeps now and then every interval until {@link Janitor.stop}. */
  start(): void;
  /** Cancels the timer and waits for a sweep in progress to end at its next batch. */
  stop(): Promise<void>;
}

/** What one sweep's passes share: the janitor's dependencies, its batch size, its stop. */
interface SweepPass {
  deps: JanitorDeps;
  batchRows: number;
  /** Whether {@link Janitor.stop} was called: a pass ends at its next batch. */
  isStopped(): boolean;
  /** What the token sweeps that found nothing left tell the next one. */
  swept: SweptThrough;
}

/** The janitor's own token sweeps that ran until a batch deleted nothing. */
interface SweptThrough {
  /** The cutoff of the last one; `undefined` before the first. */
  cutoff: number | undefined;
  /** When the last one that looked at every key and user ran. */
  fullAt: number;
}

/**
 * Deletes every token row that ended at or before `cutoff`, at most `batchRows` per transaction
 * (`Store.deleteEndedTokens`), yielding to the event loop between batches, until a batch deletes
 * none (a row ended in two ways takes two places in a batch, so a short one does not mean none is
 * left) or `isStopped()`; resolves to how many. The janitor's sweep and `token purge` alike.
 */
export async function deleteEndedTokensUntilNone(
  store: Pick<Store, "deleteEndedTokens">,
  cutoff: number,
  options: {
    batchRows?: number;
    /** `TokenBatch.endedSince`: default, every key and user that ever ended. */
    endedSince?: number;
    isStopped?: () => boolean;
    onBatch?: (count: number) => void;
  } = {},
): Promise<number> {
  const size = options.batchRows ?? JANITOR_BATCH_ROWS;
  const { endedSince } = options;
  let deleted = 0;
  while (!options.isStopped?.()) {
    const count = await store.deleteEndedTokens({ size, cutoff, endedSince });
    if (count === 0) break;
    deleted += count;
    options.onBatch?.(count);
    await nextTask();
  }
  return deleted;
}

/**
 * Deletes the token rows past retention. The first sweep, and one a day
 * ({@link JANITOR_FULL_SWEEP_MS}), looks at every key and user that ever ended; the others only
 * at those that ended since the last sweep that found nothing left, less
 * {@link JANITOR_WINDOW_MARGIN_MS}: the tokens of those that ended before it were deleted then,
 * and a key or user that ended issues no more. So a sweep's cost does not grow with the service's
 * history of rotated keys and cut-off users (docs/architecture.md, "The janitor's batch").
 */
async function deleteEndedTokenRows(pass: SweepPass): Promise<number> {
  const { deps, deps: { store, clock, metrics }, batchRows, swept } = pass;
  const now = clock.now();
  const cutoff = now - deps.retentionSeconds * 1000;
  // A clock set back (a cutoff before the last) runs a full sweep too: the times behind the
  // window may be in the future.
  const full = swept.cutoff === undefined || now - swept.fullAt >= JANITOR_FULL_SWEEP_MS ||
    cutoff < swept.cutoff;
  const deleted = await deleteEndedTokensUntilNone(store, cutoff, {
    batchRows,
    endedSince: full ? undefined : swept.cutoff! - JANITOR_WINDOW_MARGIN_MS,
    isStopped: pass.isStopped,
    onBatch: (count) => metrics?.tokensPurged(count),
  });
  // A sweep stopped before a batch found nothing tells the next one nothing.
  if (!pass.isStopped()) {
    swept.cutoff = cutoff;
    if (full) swept.fullAt = now;
  }
  return deleted;
}

/** Deletes the audit rows past the audit retention, oldest first, and audits that it did. */
async function pruneAudit(pass: SweepPass): Promise<number> {
  const { deps, deps: { store, clock }, batchRows } = pass;
  const retention = deps.auditRetentionSeconds ?? 0;
  if (retention <= 0) return 0;
  const before = clock.now() - retention * 1000;
  let deleted = 0;
  while (!pass.isStopped()) {
    const count = await store.deleteAuditBefore({ before, size: batchRows });
    deleted += count;
    if (count < batchRows) break;
    await nextTask();
  }
  if (deleted > 0) {
    await store.appendAudit({
      at: clock.now(),
      actor: "janitor",
      action: "audit.pruned",
      subject: "audit_log",
      detail: { deleted, before: new Date(before).toISOString() },
    });
  }
  return deleted;
}

/**
 * Sign-ups deleted per write transaction. Each deletion makes the account's audit rows anonymous,
 * which reads the log from its first row on (tens of ms in a log of hundreds of thousands of
 * rows): a few per write keep the write lock short for the logins meanwhile.
 */
export const UNVERIFIED_PER_WRITE = 5;

/** Deletes the portal sign-ups unverified past their lifetime, each audited. */
async function pruneUnverified(pass: SweepPass): Promise<number> {
  const { deps, deps: { store, clock } } = pass;
  const batchRows = Math.min(pass.batchRows, UNVERIFIED_PER_WRITE);
  const ttl = deps.unverifiedTtlSeconds ?? 0;
  if (ttl <= 0) return 0;
  const before = clock.now() - ttl * 1000;
  let deleted = 0;
  while (!pass.isStopped()) {
    const now = clock.now();
    const gone = await store.deleteUnverifiedPortalUsers(before, {
      now,
      limit: batchRows,
      // Each account's earlier rows take the random id its entry names, as any deletion's do.
      anonymize: toAnonymizing,
      // One entry per account, by that id: the e-mail of a sign-up never verified (perhaps not
      // its owner's) stays out of the log.
      audit: (deleted) =>
        deleted.map(({ anonymousRef, auditRows }) => ({
          at: now,
          actor: "janitor",
          action: "portal.unverified_deleted",
          subject: anonymousRef,
          detail: {
            created_before: new Date(before).toISOString(),
            audit_rows_anonymized: auditRows,
          },
        })),
    });
    deleted += gone.length;
    if (gone.length < batchRows) break;
    await nextTask();
  }
  return deleted;
}

/** Creates the janitor. Nothing runs until `start()` or `sweep()`. */
export function createJanitor(deps: JanitorDeps): Janitor {
  const { clock, logger, metrics } = deps;
  const batchRows = deps.batchRows ?? JANITOR_BATCH_ROWS;
  const intervalMs = deps.intervalMs ?? JANITOR_INTERVAL_MS;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<number> | undefined;

  const pass: SweepPass = {
    deps,
    batchRows,
    isStopped: () => stopped,
    swept: { cutoff: undefined, fullAt: -Infinity },
  };

  async function sweepAll(): Promise<number> {
    const deleted = await deleteEndedTokenRows(pass);
    if (deleted > 0) logger.info("janitor deleted token rows", { event: "janitor", deleted });
    const pruned = await pruneAudit(pass);
    if (pruned > 0) {
      logger.info("janitor deleted audit rows", { event: "janitor", audit_deleted: pruned });
    }
    const unverified = await pruneUnverified(pass);
    if (unverified > 0) {
      logger.info("janitor deleted unverified sign-ups", {
        event: "janitor",
        unverified_deleted: unverified,
      });
    }
    return deleted;
  }

  async function sweep(): Promise<number> {
    if (running !== undefined) return running;
    running = sweepAll();
    try {
      return await running;
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
