/**
 * How a limiter's leases run (limiter.ts): the store calls, in batches (limit_batch.ts) that keep
 * one key's failure its own (limit_split.ts); what a batch's keys get while the store cannot be
 * reached (a rate opens for {@link OPEN_FOR_MS}, a quota refuses); and the leases no request
 * starts by waiting for: leases ahead (limit_ahead.ts) and top-ups (limit_top_up.ts).
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import { type Logger, toErrorText } from "../platform/logger.ts";
import { StoreUnavailable } from "../store/errors.ts";
import type { LimitKind, LimitSlice, Store } from "../store/store.ts";
import { isAheadOver, markAheadDue, startAheadRound } from "./limit_ahead.ts";
import { createLeaseBatcher, type LeaseBatcher } from "./limit_batch.ts";
import type { LimitEntry, LimitKeys } from "./limit_keys.ts";
import {
  findNeedingSlots,
  type LeaseRound,
  startLeaseRound,
  toSliceReturns,
} from "./limit_slots.ts";
import { splitFailed } from "./limit_split.ts";
import { isKeyTopUpAsking, isKeyTopUpDue, isTopUpAsking, TOP_UP_RETRY_MS } from "./limit_top_up.ts";

/** A rate admits uncounted this long after the store could not be reached. */
export const OPEN_FOR_MS = 1_000;

/** What the leases need of the limiter's dependencies. */
export interface LeaseDeps {
  store: Pick<Store, "leaseLimits">;
  clock: Clock;
  /** How long leases ahead gather for a batch (limit_batch.ts, `GATHER_MS`); tests lengthen it. */
  gatherMs?: number;
  logger?: Pick<Logger, "warn">;
  metrics?: {
    limitStoreUnavailable(kind: LimitKind): void;
    /** A store call leased for `keys` keys at once. */
    limitLeases?(keys: number): void;
  };
}

/**
 * The store could not be reached for a lease: the rates that need units admit uncounted for
 * {@link OPEN_FOR_MS}; a quota that needs units, or a key whose limits are unknown, refuses
 * (the error is thrown).
 */
function openForOutage(
  entry: LimitEntry,
  error: StoreUnavailable,
  now: number,
  metrics: LeaseDeps["metrics"],
): void {
  const needing = findNeedingSlots(entry, now);
  if (entry.slots === undefined || needing.some((slot) => slot.rule.kind === "quota")) {
    metrics?.limitStoreUnavailable("quota");
    throw error;
  }
  for (const slot of needing) {
    slot.openUntil = now + OPEN_FOR_MS;
    metrics?.limitStoreUnavailable("rate");
  }
}

/** A batch's outcome for one key when the store could not be reached: refused, or admitted. */
function toOutageOutcome(
  entry: LimitEntry,
  error: StoreUnavailable,
  now: number,
  metrics: LeaseDeps["metrics"],
): unknown {
  try {
    openForOutage(entry, error, now, metrics);
    return undefined;
  } catch (refused) {
    return refused;
  }
}

/**
 * One key's lease in a batch: for the units its requests wait for (`now`), more of its current
 * window's before they run out (`topUp`), or its next window's (`ahead`).
 */
export interface LeaseItem {
  entry: LimitEntry;
  kind: "now" | "topUp" | "ahead";
}

/**
 * Creates the batcher a limiter leases through: a batch is one store call when it can be, and a
 * queued lease with nothing left to ask for (a lease ahead whose window began, a top-up no longer
 * needed, either for a key dropped meanwhile) settles without one.
 */
export function createLimitLeaseBatcher(
  deps: LeaseDeps,
  keys: Pick<LimitKeys, "isCurrent" | "giveBack">,
): LeaseBatcher<LeaseItem> {
  const { store, clock, metrics } = deps;
  let warnedUnavailable = false;

  /** A key's lease: for the units it needs, or (its units kept apart) for its next window. */
  function startRound(entry: LimitEntry, kind: LeaseItem["kind"], now: number): LeaseRound {
    if (kind === "now") return startLeaseRound(entry, now);
    if (kind === "topUp") return startLeaseRound(entry, now, isTopUpAsking);
    const round = startAheadRound(entry, now);
    return { want: round.want, keep: (slices) => keys.giveBack(round.keep(slices)) };
  }

  /** Leases for a batch of keys, in one store call if it can; each key's outcome, in order. */
  async function leaseBatch(items: LeaseItem[]): Promise<unknown[]> {
    try {
      return await leaseCall(items);
    } catch (error) {
      // One key's failure must not fail the others of its batch: halves, so that only its own
      // requests get the error.
      return await splitFailed(items, error, leaseCall);
    }
  }

  /**
   * Leases for a batch of keys in one store call; each key's outcome, in order. Throws what
   * fails the call, but for `StoreUnavailable` (the outage's outcomes).
   */
  async function leaseCall(items: LeaseItem[]): Promise<unknown[]> {
    const now = clock.now();
    const rounds = items.map(({ entry, kind }) => startRound(entry, kind, now));
    metrics?.limitLeases?.(items.length);
    let answers: LimitSlice[][];
    try {
      answers = await store.leaseLimits(
        items.map(({ entry, kind }, i) => ({
          ...entry.owner,
          now,
          want: rounds[i].want,
          ...(kind === "ahead" ? { ahead: true } : {}),
        })),
      );
    } catch (error) {
      if (!(error instanceof StoreUnavailable)) throw error;
      if (!warnedUnavailable) {
        warnedUnavailable = true;
        deps.logger?.warn(
          "limits: the store cannot be reached; rates admit uncounted, quotas refuse",
          { event: "limits_store_unavailable" },
        );
      }
      // Judged when the call failed, which can be seconds after it began (a busy SQLite file, a
      // PostgreSQL host that does not answer): a rate opens for a second from then.
      const failedAt = clock.now();
      // A lease ahead, and a top-up of a key with units in hand, neither refuses nor opens: those
      // units still admit. A top-up of a key out of units is what its requests wait for.
      return items.map(({ entry, kind }) =>
        kind === "now" || kind === "topUp" && findNeedingSlots(entry, failedAt).length > 0
          ? toOutageOutcome(entry, error, failedAt, metrics)
          : error
      );
    }
    const after = clock.now();
    return items.map(({ entry }, i) => {
      // Dropped meanwhile (its limits changed): the units go straight back.
      if (keys.isCurrent(entry)) rounds[i].keep(answers[i], after);
      else keys.giveBack(toSliceReturns(answers[i]));
      return undefined;
    });
  }

  return createLeaseBatcher(leaseBatch, {
    gatherMs: deps.gatherMs,
    isOver: ({ entry, kind }) =>
      kind !== "now" &&
      (!keys.isCurrent(entry) || (kind === "ahead"
        ? isAheadOver(entry, clock.now())
        : !isKeyTopUpAsking(entry, clock.now()))),
  });
}

/**
 * The leases a limiter starts without a request waiting for them: a lease ahead, and a top-up
 * (which a request out of units may then wait for). `pause()` (the limiter's stop) keeps new ones
 * from starting once the leases under way were taken; `resume()` undoes it.
 */
export function createBackgroundLeases(
  deps: Pick<LeaseDeps, "clock" | "logger"> & {
    batcher: LeaseBatcher<LeaseItem>;
    /** `--limit-lease-ahead`. */
    leaseAhead: boolean;
  },
) {
  const { batcher, clock, leaseAhead } = deps;
  let warnedBackground = false;
  let paused = false;

  /** Logs the first failure of a lease the request that started it did not wait for. */
  function warnBackground(error: unknown, kind: "topUp" | "ahead"): void {
    if (error instanceof StoreUnavailable || warnedBackground) return;
    warnedBackground = true;
    deps.logger?.warn("limits: a lease in the background failed", {
      event: "limits_background_lease_failed",
      kind,
      error: toErrorText(error),
    });
  }

  /**
   * Starts a lease ahead of a key's next window in the background when one is due (its key used
   * in the last part of its window: limit_ahead.ts, toAheadMargin), unless one is under way.
   */
  function leaseAheadIfDue(entry: LimitEntry, now: number, refused = false): void {
    if (!leaseAhead || paused || entry.leasingAhead !== undefined) return;
    if (!markAheadDue(entry, now, refused)) return;
    entry.leasingAhead = batcher.lease({ entry, kind: "ahead" }, { background: true })
      .catch((error) => warnBackground(error, "ahead"))
      .finally(() => entry.leasingAhead = undefined);
  }

  /**
   * Starts a top-up of a key's current window when one is due (limit_top_up.ts), in the batcher's
   * foreground: its key's next requests may wait for it. Those that do get its outcome as their
   * lease's; a failure is logged once, and the key does not top up again for
   * {@link TOP_UP_RETRY_MS}.
   */
  function topUpIfDue(entry: LimitEntry, now: number): void {
    if (paused || entry.toppingUp !== undefined || now < (entry.topUpRetryAt ?? 0)) return;
    if (!isKeyTopUpDue(entry, now)) return;
    const lease = batcher.lease({ entry, kind: "topUp" });
    entry.toppingUp = lease;
    // Attached first, so cleared before a request that waited for it asks again.
    lease.then(() => entry.toppingUp = undefined, (error) => {
      entry.toppingUp = undefined;
      entry.topUpRetryAt = clock.now() + TOP_UP_RETRY_MS;
      warnBackground(error, "topUp");
    });
  }

  return {
    leaseAheadIfDue,
    topUpIfDue,
    pause: () => void (paused = true),
    resume: () => void (paused = false),
  };
}
