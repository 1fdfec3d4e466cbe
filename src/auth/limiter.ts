/**
 * The limiter: admits a request against the rates and quotas of its API key, its user and the
 * default, exactly across request workers and instances, without the database on the
 * per-request path.
 *
 * Each limiter (one per thread: the main thread's listener or a request worker) leases slices
 * of a limit's current window from the store (`Store.leaseLimits`: one atomic transaction that
 * never grants more than the window has left) and admits locally, synchronously, until its
 * slice is spent. So the requests admitted in a window never exceed its limit, however many
 * threads, processes and instances share the database: each one admitted spent a unit that one
 * lease granted, and the leases of a window sum to at most its limit.
 *
 * The pieces: limit_slots.ts sizes the slices and keeps the units in hand of one key,
 * limit_ahead.ts when and how much a key leases ahead of its next window, limit_top_up.ts when it
 * tops up its current one, limit_keys.ts holds the keys and the units on their way back,
 * limit_batch.ts coalesces the leases of the keys that need units at once into one store call,
 * limit_split.ts retries a failed batch in halves, limit_status.ts is what the edge's `RateLimit`
 * headers are made of, change_follower.ts follows the change feed.
 *
 * Leases ahead: a key used in the last part of its window leases its next window's units in the
 * background (through the same batcher, so many keys share one store call), counted by the store
 * against that next window, so that at the boundary its requests admit from units already in
 * hand instead of all waiting for a lease at once (a key refused there leases ahead too). The
 * request that starts it does not wait for it, and its failure neither refuses nor opens anything
 * (it is logged once). The leases requests wait for go first in a batch; a lease ahead still
 * queued when its window begins is dropped. Off with `leaseAhead: false` (`--limit-lease-ahead`).
 *
 * Top-ups: a key whose units in hand run low mid-window, where its window's budget is not
 * contested, leases more of that window (limit_top_up.ts) through the same batcher, among the
 * leases requests wait for (its key's next requests may), so that a slice sized on a rate measured
 * too low does not make a request wait; a request that runs out meanwhile waits for that top-up
 * (which also asks for any of the key's limits out of units) and gets its outcome. A failed top-up
 * is logged once, and its key does not top up again for a second.
 *
 * What can be lost (admitted fewer than the limit allows, never more): units a thread holds
 * when a window ends (at most its last slice per limit, and what it held when it topped up),
 * units held by a thread that crashed (returned never; a clean stop returns them), and units
 * held unused until the idle return ({@link IDLE_RETURN_MS}, once half a window's budget is
 * leased), those leased ahead included (at most one slice per limit, key entry and thread: a
 * user's limit can have one slice leased ahead for each of its keys). docs/architecture.md.
 *
 * A change of a limit is learned through the grant change feed (the key's, the user's, or all
 * for the default): the key's entry is dropped (its unspent units given back) and its limits
 * read again with the next lease.
 *
 * While the store cannot be reached, the choice is per kind: a **rate** admits uncounted for
 * {@link OPEN_FOR_MS} at a time (availability first: a rate protects capacity, and the outage
 * already does), a **quota** refuses with `StoreUnavailable` (503): sold requests are never
 * given away uncounted. A key whose limits are not yet known refuses as a quota does.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import { type Logger, toErrorText } from "../platform/logger.ts";
import { StoreUnavailable } from "../store/errors.ts";
import type { LimitKind, LimitOwner, LimitReturn, LimitSlice, Store } from "../store/store.ts";
import { createChangeFollower } from "./change_follower.ts";
import { isAheadOver, markAheadDue, startAheadRound } from "./limit_ahead.ts";
import { createLeaseBatcher } from "./limit_batch.ts";
import { splitFailed } from "./limit_split.ts";
import { createLimitKeys, type LimitEntry } from "./limit_keys.ts";
import { isKeyTopUpAsking, isKeyTopUpDue, isTopUpAsking, TOP_UP_RETRY_MS } from "./limit_top_up.ts";
import {
  checkSlots,
  findNeedingSlots,
  IDLE_RETURN_MS,
  type LeaseRound,
  type Slot,
  startLeaseRound,
  takeUnits,
  toRetryAfter,
  toSliceReturns,
  toStatuses,
} from "./limit_slots.ts";
import { LimitExceeded, type LimitStatuses } from "./limit_status.ts";

/** A rate admits uncounted this long after the store could not be reached. */
export const OPEN_FOR_MS = 1_000;
/** Times a request asks for a lease before it is refused as over its limit. */
const MAX_ATTEMPTS = 8;

/** What {@link createLimiter} needs. */
export interface LimiterDeps {
  store: Pick<
    Store,
    "leaseLimits" | "returnLimitUnits" | "readGrantEpoch" | "readGrantChanges"
  >;
  clock: Clock;
  logger?: Pick<Logger, "warn">;
  /**
   * Lease a key's next window ahead of its boundary (`--limit-lease-ahead`; required, so that a
   * caller cannot leave the rolling-upgrade switch unwired). Off: every window is leased once it
   * has begun, as servers of 0.17 and earlier do, which do not know the units leased ahead (so a
   * rolling upgrade from them runs with it off). Top-ups (limit_top_up.ts) are ordinary leases of
   * the current window, which every version reads alike: they stay on.
   */
  leaseAhead: boolean;
  /** Counts limited requests by kind, and admissions while the store could not be reached. */
  metrics?: {
    limitedRequest(kind: LimitKind): void;
    limitStoreUnavailable(kind: LimitKind): void;
    /** A store call leased for `keys` keys at once. */
    limitLeases?(keys: number): void;
    /** A request waited for a lease (its key had no units in hand). */
    limitLeaseWait?(): void;
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
  metrics: LimiterDeps["metrics"],
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
  metrics: LimiterDeps["metrics"],
): unknown {
  try {
    openForOutage(entry, error, now, metrics);
    return undefined;
  } catch (refused) {
    return refused;
  }
}

/** Gives unspent units back to the store; a failure is logged, not thrown. */
async function returnUnits(
  { store, logger }: Pick<LimiterDeps, "store" | "logger">,
  units: readonly LimitReturn[],
): Promise<void> {
  try {
    await store.returnLimitUnits(units);
  } catch (error) {
    logger?.warn("limits: could not give unspent units back", {
      event: "limits_return_failed",
      error: toErrorText(error),
    });
  }
}

/**
 * One key's lease in a batch: for the units its requests wait for (`now`), more of its current
 * window's before they run out (`topUp`), or its next window's (`ahead`).
 */
interface LeaseItem {
  entry: LimitEntry;
  kind: "now" | "topUp" | "ahead";
}

/** Creates a thread's limiter. Call `start()` for the idle return, `stop()` to give units back. */
export function createLimiter(deps: LimiterDeps) {
  const { store, clock, metrics } = deps;
  const { leaseAhead } = deps;
  const keys = createLimitKeys();
  /** When `admit` read the clock: the learned changes are applied as of then. */
  let followedAt = 0;
  const follower = createChangeFollower(store, (scope) => keys.forgetScope(scope, followedAt));
  const batcher = createLeaseBatcher(leaseBatch, {
    // A lease ahead whose window began while it waited for its turn asks for nothing, nor does a
    // top-up with nothing left to ask for, nor either for a key dropped meanwhile.
    isOver: ({ entry, kind }) =>
      kind !== "now" &&
      (!keys.isCurrent(entry) || (kind === "ahead"
        ? isAheadOver(entry, clock.now())
        : !isKeyTopUpAsking(entry, clock.now()))),
  });
  let timer: ReturnType<typeof setInterval> | undefined;
  let warnedUnavailable = false;
  let warnedBackground = false;
  /** Set by `stop()`: no top-up or lease ahead starts after it took the leases under way. */
  let stopping = false;

  function refuse(entry: LimitEntry, denied: Slot, now: number): never {
    // A key at its limit leases ahead too: after the boundary its requests admit at once.
    leaseAheadIfDue(entry, now, true);
    metrics?.limitedRequest(denied.rule.kind);
    const statuses = toStatuses(entry, entry.slots ?? [denied], now, denied);
    throw new LimitExceeded(denied.rule.kind, statuses, toRetryAfter(denied, now));
  }

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
    if (!leaseAhead || stopping || entry.leasingAhead !== undefined) return;
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
    if (stopping || entry.toppingUp !== undefined || now < (entry.topUpRetryAt ?? 0)) return;
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

  /** Admits a request from the units in hand, then starts the background leases now due. */
  function admitFromHand(entry: LimitEntry, slots: Slot[], now: number): LimitStatuses {
    const statuses = takeUnits(entry, slots, now);
    leaseAheadIfDue(entry, now);
    topUpIfDue(entry, now);
    return statuses;
  }

  async function admitLeasing(owner: LimitOwner): Promise<LimitStatuses> {
    for (let attempt = 0;; attempt++) {
      const entry = keys.entryOf(owner, clock.now());
      entry.waiting++;
      metrics?.limitLeaseWait?.();
      try {
        // A top-up under way may bring the units: the requests wait for it before asking again.
        await (entry.leasing ??= (entry.toppingUp ?? batcher.lease({ entry, kind: "now" }))
          .finally(() => entry.leasing = undefined));
      } finally {
        entry.waiting--;
      }
      const now = clock.now();
      const current = keys.entryOf(owner, now);
      const slots = current.slots;
      if (slots === undefined) continue;
      const verdict = checkSlots(current, slots, now);
      if (verdict === undefined) return admitFromHand(current, slots, now);
      if (verdict !== "lease") refuse(current, verdict, now);
      if (attempt >= MAX_ATTEMPTS) refuse(current, slots.find((slot) => slot.local < 1)!, now);
    }
  }

  /**
   * Admits one request of this key and user, or throws {@link LimitExceeded} (a limit spent)
   * or `StoreUnavailable` (a quota that cannot be counted). Synchronous while the units in
   * hand last; resolves to the limits' statuses (none without limits).
   */
  function admit(owner: LimitOwner): LimitStatuses | Promise<LimitStatuses> {
    const now = clock.now();
    followedAt = now;
    follower.follow();
    const entry = keys.entryOf(owner, now);
    const slots = entry.slots;
    if (slots !== undefined && entry.leasing === undefined) {
      const verdict = checkSlots(entry, slots, now);
      if (verdict === undefined) return admitFromHand(entry, slots, now);
      if (verdict !== "lease") refuse(entry, verdict, now);
    }
    return admitLeasing(owner);
  }

  /** Gives back idle units (or all) and forgets idle keys; writes what is pending. */
  async function flush(all = false): Promise<void> {
    keys.release(clock.now(), all);
    const units = keys.takeReturns();
    if (units.length === 0) return;
    await returnUnits(deps, units);
  }

  return {
    admit,
    /** Starts giving idle units back every half second. */
    start(): void {
      stopping = false;
      timer ??= setInterval(() => void flush(), IDLE_RETURN_MS / 2);
    },
    /** Stops the idle return and gives every unit in hand back (a clean stop loses none). */
    async stop(): Promise<void> {
      stopping = true;
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      await Promise.allSettled(keys.leasings());
      await flush(true);
    },
    /** Gives back idle units now (tests). */
    flush: () => flush(),
    /** Waits for the leases under way, ahead included (tests). */
    settle: async (): Promise<void> => void await Promise.allSettled(keys.leasings()),
    /** Store calls that leased so far (tests). */
    readLeaseCalls: batcher.readBatches,
    /** Units in hand, by key (tests and the admin view). */
    readUnitsInHand: keys.readUnitsInHand,
    /** Units leased ahead for the next windows, by key (tests). */
    readUnitsAhead: keys.readUnitsAhead,
  };
}

/** A thread's limiter. */
export type Limiter = ReturnType<typeof createLimiter>;
