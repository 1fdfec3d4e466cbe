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
 * limit_leases.ts runs the leases (the store calls, the outage's outcomes, the leases ahead and
 * top-ups), limit_batch.ts coalesces the leases of the keys that need units at once into one store
 * call, limit_split.ts retries a failed batch in halves, limit_status.ts is what the edge's
 * `RateLimit` headers are made of, change_follower.ts follows the change feed.
 *
 * Leases ahead: a key used in the last part of its window (each key at its own moment in the last
 * 15 s, so that a boundary's leases spread) leases its next window's units in the background
 * (through the same batcher, so many keys share one store call), counted by the store
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
 * leased, or for a rotated key's entry, contested or not), those leased ahead included (at most
 * one slice per limit, key entry and thread: a user's limit can have one slice leased ahead for
 * each of its keys). docs/architecture.md.
 *
 * A change of a limit, or of the key (a rotation), is learned through the grant change feed (the
 * key's, the user's, or all for the default): the key's entry is dropped, its unspent units given
 * back at once, and its limits read again with the next lease.
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
import type { LimitKind, LimitOwner, LimitReturn, Store } from "../store/store.ts";
import { createChangeFollower } from "./change_follower.ts";
import { createLimitKeys, type LimitEntry, type LimitKeys } from "./limit_keys.ts";
import { createBackgroundLeases, createLimitLeaseBatcher } from "./limit_leases.ts";
import {
  checkSlots,
  IDLE_RETURN_MS,
  type Slot,
  takeUnits,
  toRetryAfter,
  toStatuses,
} from "./limit_slots.ts";
import { LimitExceeded, type LimitStatuses } from "./limit_status.ts";

export { OPEN_FOR_MS } from "./limit_leases.ts";

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
  /**
   * Draws each key's place in the spread of leases ahead, 0 to 1 (limit_ahead.ts,
   * `AHEAD_SPREAD_MS`); default `Math.random`, so that each thread and instance leases a key at
   * its own moment. Tests fix it.
   */
  drawAheadSpread?: () => number;
  /** How long leases ahead gather for a batch (limit_batch.ts, `GATHER_MS`); tests lengthen it. */
  gatherMs?: number;
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
 * Gives the units of keys a learned change dropped back now, not with the next idle return (up to
 * half a second later): meanwhile other threads that found the window spent would refuse requests
 * those units could admit (a key's rotation, a limit's change). One store call at a time; units
 * queued meanwhile go with the next.
 */
function createDroppedReturns(
  deps: Pick<LimiterDeps, "store" | "logger">,
  keys: Pick<LimitKeys, "takeReturns">,
) {
  let returning: Promise<void> | undefined;
  function send(): void {
    if (returning !== undefined) return;
    const units = keys.takeReturns();
    if (units.length === 0) return;
    returning = returnUnits(deps, units).finally(() => {
      returning = undefined;
      send();
    });
  }
  return {
    send,
    /** Waits for every return under way, those it starts for units queued meanwhile included. */
    async settle(): Promise<void> {
      while (returning !== undefined) await returning;
    },
  };
}

/**
 * Rounds of waiting for the leases under way that `stop()` makes at most: requests still running
 * may keep beginning leases, and a stop must end.
 */
const STOP_ROUNDS = 8;

/**
 * Waits for the leases under way, and for those requests begin meanwhile (a shutdown past its
 * deadline leaves requests running), up to {@link STOP_ROUNDS} rounds: a stop must end.
 */
async function awaitLeasings(keys: Pick<LimitKeys, "leasings">): Promise<void> {
  for (let round = 0; round < STOP_ROUNDS; round++) {
    const leasings = keys.leasings();
    if (leasings.length === 0) return;
    await Promise.allSettled(leasings);
  }
}

/** Creates a thread's limiter. Call `start()` for the idle return, `stop()` to give units back. */
export function createLimiter(deps: LimiterDeps) {
  const { store, clock, metrics } = deps;
  const keys = createLimitKeys(deps.drawAheadSpread);
  /** When `admit` read the clock: the learned changes are applied as of then. */
  let followedAt = 0;
  const dropped = createDroppedReturns(deps, keys);
  const follower = createChangeFollower(store, (scope) => {
    keys.forgetScope(scope, followedAt);
    dropped.send();
  });
  let timer: ReturnType<typeof setInterval> | undefined;
  const batcher = createLimitLeaseBatcher(deps, keys);
  const background = createBackgroundLeases({ ...deps, batcher });
  const { leaseAheadIfDue, topUpIfDue } = background;

  function refuse(entry: LimitEntry, denied: Slot, now: number): never {
    // A refused request is use of the key: the idle return keeps its units (those leased ahead,
    // which its requests spend after the boundary), and the key is not forgotten.
    entry.lastUseAt = now;
    for (const slot of entry.slots ?? []) slot.lastUseAt = now;
    // A key at its limit leases ahead too: after the boundary its requests admit at once.
    leaseAheadIfDue(entry, now, true);
    metrics?.limitedRequest(denied.rule.kind);
    const statuses = toStatuses(entry, entry.slots ?? [denied], now, denied);
    throw new LimitExceeded(denied.rule.kind, statuses, toRetryAfter(denied, now));
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

  /**
   * Gives back idle units (or all) and forgets idle keys; writes what is pending, and resolves
   * once the units a learned change dropped are back too.
   */
  async function flush(all = false): Promise<void> {
    keys.release(clock.now(), all);
    const units = keys.takeReturns();
    if (units.length > 0) await returnUnits(deps, units);
    await dropped.settle();
  }

  return {
    admit,
    /** Starts giving idle units back every half second. */
    start(): void {
      background.resume();
      timer ??= setInterval(() => void flush(), IDLE_RETURN_MS / 2);
    },
    /**
     * Stops the idle return and gives every unit in hand back (a clean stop loses none), after
     * the leases under way ({@link awaitLeasings}).
     */
    async stop(): Promise<void> {
      background.pause();
      // Leases ahead gathering for a batch go now: none joins them after the pause.
      batcher.flushGathering();
      clearInterval(timer);
      timer = undefined;
      await awaitLeasings(keys);
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
