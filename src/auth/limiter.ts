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
 * Slices adapt: a lease asks for about {@link SLICE_TARGET_MS} of this thread's recent traffic on
 * the key (at least the requests waiting, and at least a 64th of what the window has left, so
 * that a sparse key with a plentiful budget does not lease per request), never more than an
 * eighth of what the window has left, so slices shrink to one unit as a window runs out. What can be lost (admitted fewer than
 * the limit allows, never more): units a thread holds when a window ends (at most its last
 * slice per limit), units held by a thread that crashed (returned never; a clean stop returns
 * them), and units held unused until the idle return ({@link IDLE_RETURN_MS}, once half a
 * window's budget is leased). docs/architecture.md.
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
import type { Logger } from "../platform/logger.ts";
import { StoreUnavailable } from "../store/errors.ts";
import type {
  LimitKind,
  LimitOwner,
  LimitReturn,
  LimitRule,
  LimitSlice,
  Store,
} from "../store/store.ts";
import { toLimitWindow } from "../store/store_limits.ts";
import { AuthError } from "./errors.ts";

/** A lease aims at this much of the thread's recent traffic on a key. */
export const SLICE_TARGET_MS = 1_000;
/** The most units one lease takes from one window. */
export const MAX_SLICE = 1_000;
/** A lease never takes more than this share of what its window has left. */
const LEFT_SHARE = 8;
/**
 * A lease takes at least this share of what its window has left (at most {@link MAX_SLICE}), so
 * that a key with a plentiful budget and sparse traffic does not lease for every request.
 */
const SPARE_SHARE = 64;
/** Units unused this long go back to the store. */
export const IDLE_RETURN_MS = 1_000;
/** After a lease found a window spent, refuse locally this long before asking again. */
export const RECHECK_MS = 250;
/** A rate admits uncounted this long after the store could not be reached. */
export const OPEN_FOR_MS = 1_000;
/** A key's entry unused this long is forgotten (its units returned first). */
const FORGET_MS = 60_000;
/** Times a request asks for a lease before it is refused as over its limit. */
const MAX_ATTEMPTS = 8;

/**
 * One limit as the responses of its key describe it: the same object for as long as the limit
 * and its window's length stay the same, so the edge can render it once.
 */
export interface LimitPolicy {
  /** The policy's name in the `RateLimit` headers: `<scope>-<kind>-<period>`. */
  readonly name: string;
  readonly kind: LimitKind;
  readonly max: number;
  /** The window's length in seconds; `undefined` for a quota that never refills. */
  readonly windowSeconds?: number;
}

/** The limits a request was admitted (or refused) by, and what each had left then. */
export interface LimitStatuses {
  /** The same array for a key's requests while its limits and their windows' lengths stay. */
  readonly policies: readonly LimitPolicy[];
  /**
   * Per policy, an estimate: units no server has leased, plus this thread's unspent slice
   * (0 for the limit that refused).
   */
  readonly remaining: readonly number[];
  /** Per policy, seconds until its window ends; `undefined` for a quota that never refills. */
  readonly resetSeconds: readonly (number | undefined)[];
}

/** A request over one of its limits: 429 with `Retry-After` and the limits' statuses. */
export class LimitExceeded extends AuthError {
  readonly limits: LimitStatuses;
  constructor(kind: LimitKind, limits: LimitStatuses, retryAfterSeconds?: number) {
    super(
      kind === "rate" ? "rate_limited" : "quota_exceeded",
      kind === "rate"
        ? "Rate limit exceeded: retry after the time given"
        : "Quota exceeded: no requests left for this API key in this period",
      { retryAfterSeconds },
    );
    this.limits = limits;
  }
}

/** What {@link createLimiter} needs. */
export interface LimiterDeps {
  store: Pick<
    Store,
    "leaseLimits" | "returnLimitUnits" | "readGrantEpoch" | "readGrantChanges"
  >;
  clock: Clock;
  logger?: Pick<Logger, "warn">;
  /** Counts limited requests by kind, and admissions while the store could not be reached. */
  metrics?: {
    limitedRequest(kind: LimitKind): void;
    limitStoreUnavailable(kind: LimitKind): void;
  };
}

interface Slot {
  rule: LimitRule;
  /** What responses say of it; replaced when the rule or the window's length changes. */
  policy: LimitPolicy;
  subjectId: number;
  windowStart: number;
  windowEnd: number;
  /** Units in hand for this window. */
  local: number;
  /** The window's units leased by every server, as of this thread's last lease. */
  used: number;
  exhaustedUntil: number;
  openUntil: number;
  /** Admitted since the last lease, and when that was: this thread's rate on the key. */
  admitted: number;
  leasedAt: number;
  /** Units per ms. */
  rate: number;
  lastUseAt: number;
}

interface Entry {
  owner: LimitOwner;
  /** `undefined` until the first lease has said which limits apply. */
  slots?: Slot[];
  /** The slots' policies, kept until one of them changes. */
  policies?: readonly LimitPolicy[];
  leasing?: Promise<void>;
  waiting: number;
  lastUseAt: number;
}

/** No limits: nothing to report. */
const NONE: LimitStatuses = Object.freeze({
  policies: Object.freeze([]),
  remaining: Object.freeze([]),
  resetSeconds: Object.freeze([]),
});

function toWindowSeconds(windowStart: number, windowEnd: number): number | undefined {
  return Number.isFinite(windowEnd) ? Math.round((windowEnd - windowStart) / 1000) : undefined;
}

/** The slot's policy, a new object only when the rule or the window's length changed. */
function toPolicy(slot: Pick<Slot, "rule" | "windowStart" | "windowEnd">, was?: LimitPolicy) {
  const { rule } = slot;
  const windowSeconds = toWindowSeconds(slot.windowStart, slot.windowEnd);
  const name = `${rule.scope}-${rule.kind}-${rule.period}`;
  if (
    was !== undefined && was.name === name && was.max === rule.max &&
    was.windowSeconds === windowSeconds
  ) {
    return was;
  }
  return Object.freeze({ name, kind: rule.kind, max: rule.max, windowSeconds });
}

function toResetSeconds(slot: Slot, now: number): number | undefined {
  return Number.isFinite(slot.windowEnd)
    ? Math.max(0, Math.ceil((slot.windowEnd - now) / 1000))
    : undefined;
}

function toRemaining(slot: Slot): number {
  return Math.max(0, slot.rule.max - slot.used) + slot.local;
}

/** The statuses of an entry's slots at `now`; `denied`'s remaining is 0. */
function toStatuses(entry: Entry, slots: Slot[], now: number, denied?: Slot): LimitStatuses {
  const remaining: number[] = new Array(slots.length);
  const resetSeconds: (number | undefined)[] = new Array(slots.length);
  for (let i = 0; i < slots.length; i++) {
    remaining[i] = slots[i] === denied ? 0 : toRemaining(slots[i]);
    resetSeconds[i] = toResetSeconds(slots[i], now);
  }
  const policies = slots === entry.slots
    ? entry.policies ??= slots.map((slot) => slot.policy)
    : slots.map((slot) => slot.policy);
  return { policies, remaining, resetSeconds };
}

/** Creates a thread's limiter. Call `start()` for the idle return, `stop()` to give units back. */
export function createLimiter(deps: LimiterDeps) {
  const { store, clock, metrics } = deps;
  const entries = new Map<number, Entry>();
  const keysOfUser = new Map<number, Set<number>>();
  let pendingReturns: LimitReturn[] = [];
  let seenEpoch = store.readGrantEpoch();
  let timer: ReturnType<typeof setInterval> | undefined;
  let warnedUnavailable = false;

  function giveBack(entry: Entry, now: number, onlyIdle: boolean): void {
    for (const slot of entry.slots ?? []) {
      if (slot.local <= 0) continue;
      // Idle units matter only where the window's budget is contested: half of it leased.
      if (onlyIdle && (now - slot.lastUseAt < IDLE_RETURN_MS || slot.used * 2 < slot.rule.max)) {
        continue;
      }
      if (now < slot.windowEnd) {
        pendingReturns.push({
          limitId: slot.rule.id,
          subjectId: slot.subjectId,
          windowStart: slot.windowStart,
          units: slot.local,
        });
      }
      slot.used = Math.max(0, slot.used - slot.local);
      slot.local = 0;
    }
  }

  function forget(apiKeyId: number, now: number): void {
    const entry = entries.get(apiKeyId);
    if (entry === undefined) return;
    giveBack(entry, now, false);
    entries.delete(apiKeyId);
    const keys = keysOfUser.get(entry.owner.userId);
    keys?.delete(apiKeyId);
    if (keys?.size === 0) keysOfUser.delete(entry.owner.userId);
  }

  /** Drops the entries a learned change of limits (or of a key or user) touches. */
  function followChanges(now: number): void {
    const epoch = store.readGrantEpoch();
    if (epoch === undefined || epoch === seenEpoch) return;
    const changes = seenEpoch === undefined ? undefined : store.readGrantChanges(seenEpoch);
    seenEpoch = epoch;
    if (changes === undefined || changes.some((scope) => scope.kind === "all")) {
      for (const apiKeyId of [...entries.keys()]) forget(apiKeyId, now);
      return;
    }
    for (const scope of changes) {
      if (scope.kind === "key") forget(scope.id, now);
      if (scope.kind === "user") {
        for (const apiKeyId of [...keysOfUser.get(scope.id) ?? []]) forget(apiKeyId, now);
      }
    }
  }

  function entryOf(owner: LimitOwner, now: number): Entry {
    let entry = entries.get(owner.apiKeyId);
    if (entry === undefined || entry.owner.userId !== owner.userId) {
      if (entry !== undefined) forget(owner.apiKeyId, now);
      entry = { owner, waiting: 0, lastUseAt: now };
      entries.set(owner.apiKeyId, entry);
      let keys = keysOfUser.get(owner.userId);
      if (keys === undefined) keysOfUser.set(owner.userId, keys = new Set());
      keys.add(owner.apiKeyId);
    }
    return entry;
  }

  /**
   * Moves a slot into the window of `now` (the units of an ended window are lost); says
   * whether its policy changed (a month's length).
   */
  function roll(slot: Slot, now: number): boolean {
    if (now < slot.windowEnd) return false;
    const window = toLimitWindow(slot.rule.period, now);
    slot.windowStart = window.start;
    slot.windowEnd = window.end;
    slot.local = 0;
    slot.used = 0;
    slot.exhaustedUntil = 0;
    const was = slot.policy;
    slot.policy = toPolicy(slot, was);
    return slot.policy !== was;
  }

  /**
   * Whether the units in hand admit a request now: `undefined` if they do, else the slot that
   * refuses, or `"lease"` when some limit needs units.
   */
  function check(entry: Entry, slots: Slot[], now: number): Slot | "lease" | undefined {
    let lease = false;
    for (const slot of slots) {
      if (roll(slot, now)) entry.policies = undefined;
      if (slot.local >= 1 || slot.openUntil > now) continue;
      if (slot.exhaustedUntil > now) return slot;
      lease = true;
    }
    return lease ? "lease" : undefined;
  }

  /** Admits a request from the units in hand (after {@link check} said they do). */
  function take(entry: Entry, slots: Slot[], now: number): LimitStatuses {
    entry.lastUseAt = now;
    if (slots.length === 0) return NONE;
    for (const slot of slots) {
      if (slot.local >= 1) slot.local--;
      slot.admitted++;
      slot.lastUseAt = now;
    }
    return toStatuses(entry, slots, now);
  }

  function refuse(entry: Entry, denied: Slot, now: number): never {
    metrics?.limitedRequest(denied.rule.kind);
    const retry = Number.isFinite(denied.windowEnd)
      ? Math.max(1, Math.ceil((denied.windowEnd - now) / 1000))
      : undefined;
    throw new LimitExceeded(
      denied.rule.kind,
      toStatuses(entry, entry.slots ?? [denied], now, denied),
      retry,
    );
  }

  function toSlot(slice: LimitSlice, now: number): Slot {
    const window = {
      rule: slice.rule,
      windowStart: slice.window.start,
      windowEnd: slice.window.end,
    };
    return {
      rule: slice.rule,
      policy: toPolicy(window),
      subjectId: slice.subjectId,
      windowStart: slice.window.start,
      windowEnd: slice.window.end,
      local: 0,
      used: slice.used - slice.granted,
      exhaustedUntil: 0,
      openUntil: 0,
      admitted: 0,
      leasedAt: now,
      rate: 0,
      lastUseAt: now,
    };
  }

  /** How many units a limit that needs some asks for (`slot`: what this thread knows of it). */
  function wanted(
    rule: LimitRule,
    slot: Slot | undefined,
    entry: Entry,
    used: number,
    now: number,
  ) {
    const left = rule.max - used;
    let want = Math.max(1 + entry.waiting, Math.floor(left / SPARE_SHARE));
    if (slot !== undefined) {
      want = Math.max(want, Math.ceil(slot.rate * SLICE_TARGET_MS));
      // No more than this thread may spend before the window ends.
      const spendable = Math.ceil(slot.rate * (slot.windowEnd - now)) + entry.waiting + 1;
      if (Number.isFinite(spendable)) want = Math.min(want, spendable);
    }
    return Math.min(want, MAX_SLICE, Math.max(1, Math.floor(left / LEFT_SHARE)));
  }

  async function lease(entry: Entry): Promise<void> {
    const now = clock.now();
    const known = new Map((entry.slots ?? []).map((slot) => [slot.rule.id, slot]));
    const asked = new Set<number>();
    let slices: LimitSlice[];
    try {
      slices = await store.leaseLimits({
        ...entry.owner,
        now,
        want(rule, used) {
          const slot = known.get(rule.id);
          if (slot !== undefined) {
            roll(slot, now);
            if (slot.local >= 1 || slot.openUntil > now) return 0;
            slot.rule = rule;
          }
          asked.add(rule.id);
          return wanted(rule, slot, entry, used, now);
        },
      });
    } catch (error) {
      if (!(error instanceof StoreUnavailable)) throw error;
      failOpen(entry, error, now);
      return;
    }
    const after = clock.now();
    if (entries.get(entry.owner.apiKeyId) !== entry) {
      // Dropped meanwhile (its limits changed): give the units straight back.
      pendingReturns.push(
        ...slices.filter((s) => s.granted > 0).map((s) => ({
          limitId: s.rule.id,
          subjectId: s.subjectId,
          windowStart: s.window.start,
          units: s.granted,
        })),
      );
      return;
    }
    entry.policies = undefined;
    entry.slots = slices.map((slice) => {
      const slot = known.get(slice.rule.id) ?? toSlot(slice, now);
      slot.rule = slice.rule;
      if (slot.windowStart !== slice.window.start) {
        slot.windowStart = slice.window.start;
        slot.windowEnd = slice.window.end;
        slot.local = 0;
      }
      slot.policy = toPolicy(slot, slot.policy);
      slot.local += slice.granted;
      slot.used = slice.used;
      if (asked.has(slice.rule.id)) {
        const elapsed = Math.max(1, after - slot.leasedAt);
        slot.rate = (slot.rate + slot.admitted / elapsed) / 2;
        slot.admitted = 0;
        slot.leasedAt = after;
        slot.openUntil = 0;
        slot.exhaustedUntil = slice.granted === 0
          ? Math.min(slot.windowEnd, after + RECHECK_MS)
          : 0;
      }
      return slot;
    });
  }

  /** The store could not be reached: rates admit uncounted for a while, quotas refuse. */
  function failOpen(entry: Entry, error: StoreUnavailable, now: number): never | void {
    const needing = (entry.slots ?? []).filter((slot) =>
      slot.local < 1 && slot.openUntil <= now && slot.exhaustedUntil <= now
    );
    if (entry.slots === undefined || needing.some((slot) => slot.rule.kind === "quota")) {
      metrics?.limitStoreUnavailable("quota");
      throw error;
    }
    for (const slot of needing) {
      slot.openUntil = now + OPEN_FOR_MS;
      metrics?.limitStoreUnavailable("rate");
    }
    if (!warnedUnavailable) {
      warnedUnavailable = true;
      deps.logger?.warn(
        "limits: the store cannot be reached; rates admit uncounted, quotas refuse",
        {
          event: "limits_store_unavailable",
        },
      );
    }
  }

  async function admitLeasing(owner: LimitOwner): Promise<LimitStatuses> {
    for (let attempt = 0;; attempt++) {
      const entry = entryOf(owner, clock.now());
      entry.waiting++;
      try {
        await (entry.leasing ??= lease(entry).finally(() => entry.leasing = undefined));
      } finally {
        entry.waiting--;
      }
      const now = clock.now();
      const current = entryOf(owner, now);
      const slots = current.slots;
      if (slots === undefined) continue;
      const verdict = check(current, slots, now);
      if (verdict === undefined) return take(current, slots, now);
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
    followChanges(now);
    const entry = entryOf(owner, now);
    const slots = entry.slots;
    if (slots !== undefined && entry.leasing === undefined) {
      const verdict = check(entry, slots, now);
      if (verdict === undefined) return take(entry, slots, now);
      if (verdict !== "lease") refuse(entry, verdict, now);
    }
    return admitLeasing(owner);
  }

  /** Gives back idle units and forgets idle entries; writes what is pending. */
  async function flush(all = false): Promise<void> {
    const now = clock.now();
    for (const [apiKeyId, entry] of entries) {
      if (entry.leasing !== undefined) continue;
      giveBack(entry, now, !all);
      if (all || now - entry.lastUseAt > FORGET_MS) forget(apiKeyId, now);
    }
    const units = pendingReturns;
    pendingReturns = [];
    if (units.length === 0) return;
    try {
      await store.returnLimitUnits(units);
    } catch (error) {
      deps.logger?.warn("limits: could not give unspent units back", {
        event: "limits_return_failed",
        error: String((error as Error)?.message ?? error),
      });
    }
  }

  return {
    admit,
    /** Starts giving idle units back every half second. */
    start(): void {
      timer ??= setInterval(() => void flush(), IDLE_RETURN_MS / 2);
    },
    /** Stops the idle return and gives every unit in hand back (a clean stop loses none). */
    async stop(): Promise<void> {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      await Promise.allSettled([...entries.values()].map((entry) => entry.leasing));
      await flush(true);
    },
    /** Gives back idle units now (tests). */
    flush: () => flush(),
    /** Units in hand, by key (tests and the admin view). */
    readUnitsInHand(apiKeyId: number): number {
      return (entries.get(apiKeyId)?.slots ?? []).reduce((sum, slot) => sum + slot.local, 0);
    },
  };
}

/** A thread's limiter. */
export type Limiter = ReturnType<typeof createLimiter>;
