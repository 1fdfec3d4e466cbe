/**
 * The keys a limiter holds slots for (limit_slots.ts), by key and by user, and the units on
 * their way back to the store: forgetting a key (its limits changed, it went idle, the limiter
 * stops) releases its units in hand into the queue the limiter sends back (at once after a
 * learned change, else with the idle return or the stop). A rotated key's entry (the store
 * answers its leases with its chain's last key's counters) gives idle units back contested or not.
 *
 * @module
 */
import type { GrantScope, LimitOwner, LimitReturn } from "../store/store.ts";
import { type KeySlots, releaseUnits } from "./limit_slots.ts";

/** A key's entry unused this long is forgotten (its units returned first). */
export const FORGET_MS = 60_000;

/** One key's limits on this thread. */
export interface LimitEntry extends KeySlots {
  owner: LimitOwner;
  /** The lease under way, which every request of the key waiting for units awaits. */
  leasing?: Promise<void>;
  /** The lease of its next window's units under way (no request awaits it). */
  leasingAhead?: Promise<void>;
  /** The top-up of its current window under way (requests await it only once out of units). */
  toppingUp?: Promise<void>;
  /** After a failed top-up: no other before this time. */
  topUpRetryAt?: number;
}

/** A limiter's keys. */
export interface LimitKeys {
  /** The key's entry, made (or made afresh, for a key that changed users) if need be. */
  entryOf(owner: LimitOwner, now: number): LimitEntry;
  /** Whether `entry` is still the one kept for its key (a change may have dropped it). */
  isCurrent(entry: LimitEntry): boolean;
  /** Forgets the keys a learned change touches: a key, a user's keys, or all. */
  forgetScope(scope: GrantScope, now: number): void;
  /** Releases idle units (or, with `all`, every unit and key) and forgets idle keys. */
  release(now: number, all: boolean): void;
  /** Queues units to give back. */
  giveBack(returns: readonly LimitReturn[]): void;
  /** The units queued to give back, now taken out of the queue. */
  takeReturns(): LimitReturn[];
  /** The leases under way (top-ups and leases ahead included). */
  leasings(): Promise<void>[];
  /** Units in hand for a key. */
  readUnitsInHand(apiKeyId: number): number;
  /** Units leased ahead for a key's next windows. */
  readUnitsAhead(apiKeyId: number): number;
}

/**
 * Whether the entry's key was rotated: the store answered its leases with the counters of another
 * key (its chain's last), which its traffic is moving to.
 */
function isRetiring(entry: LimitEntry): boolean {
  return entry.slots?.some((slot) =>
    slot.rule.scope !== "user" && slot.subjectId !== entry.owner.apiKeyId
  ) ?? false;
}

/**
 * Creates an empty table of keys; `drawAheadSpread` draws each key's place in the spread of
 * leases ahead (`KeySlots.aheadSpread`), a number from 0 to 1.
 */
export function createLimitKeys(drawAheadSpread: () => number = Math.random): LimitKeys {
  const entries = new Map<number, LimitEntry>();
  const keysOfUser = new Map<number, Set<number>>();
  let returns: LimitReturn[] = [];

  function forget(apiKeyId: number, now: number): void {
    const entry = entries.get(apiKeyId);
    if (entry === undefined) return;
    releaseUnits(entry, now, { onlyIdle: false, returns });
    entries.delete(apiKeyId);
    const keys = keysOfUser.get(entry.owner.userId);
    keys?.delete(apiKeyId);
    if (keys?.size === 0) keysOfUser.delete(entry.owner.userId);
  }

  return {
    entryOf(owner, now) {
      let entry = entries.get(owner.apiKeyId);
      if (entry === undefined || entry.owner.userId !== owner.userId) {
        if (entry !== undefined) forget(owner.apiKeyId, now);
        // A copy: the caller's object (the request's principal) is not kept past the request.
        entry = {
          owner: { apiKeyId: owner.apiKeyId, userId: owner.userId },
          waiting: 0,
          lastUseAt: now,
          aheadSpread: drawAheadSpread(),
        };
        entries.set(owner.apiKeyId, entry);
        let keys = keysOfUser.get(owner.userId);
        if (keys === undefined) keysOfUser.set(owner.userId, keys = new Set());
        keys.add(owner.apiKeyId);
      }
      return entry;
    },
    isCurrent: (entry) => entries.get(entry.owner.apiKeyId) === entry,
    forgetScope(scope, now) {
      if (scope.kind === "all") {
        for (const apiKeyId of [...entries.keys()]) forget(apiKeyId, now);
      } else if (scope.kind === "key") {
        forget(scope.id, now);
      } else if (scope.kind === "user") {
        for (const apiKeyId of [...keysOfUser.get(scope.id) ?? []]) forget(apiKeyId, now);
      }
    },
    release(now, all) {
      for (const [apiKeyId, entry] of entries) {
        const busy = entry.leasing ?? entry.leasingAhead ?? entry.toppingUp;
        if (busy !== undefined) continue;
        releaseUnits(entry, now, { onlyIdle: !all, returns, retiring: isRetiring(entry) });
        if (all || now - entry.lastUseAt > FORGET_MS) forget(apiKeyId, now);
      }
    },
    giveBack(units) {
      returns.push(...units);
    },
    takeReturns() {
      const taken = returns;
      returns = [];
      return taken;
    },
    leasings: () =>
      [...entries.values()].flatMap((entry) =>
        [entry.leasing, entry.leasingAhead, entry.toppingUp].filter((p) => p !== undefined)
      ),
    readUnitsInHand(apiKeyId) {
      return (entries.get(apiKeyId)?.slots ?? []).reduce((sum, slot) => sum + slot.local, 0);
    },
    readUnitsAhead(apiKeyId) {
      return (entries.get(apiKeyId)?.slots ?? []).reduce((sum, slot) => sum + slot.ahead, 0);
    },
  };
}
