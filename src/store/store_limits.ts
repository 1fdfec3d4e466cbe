/**
 * The store's limit methods (rates and quotas per API key, per user, and a default) and their row
 * types, with the one rule both backends and the domain share: which window a time falls in.
 * `Store` (store.ts) extends {@link LimitStore} and re-exports the types.
 *
 * How the counting stays exact without the database on every request is the limiter's
 * (src/auth/limiter.ts): it leases slices of a limit's window from the store with
 * {@link LimitStore.leaseLimits} (one atomic transaction that never grants more than the window
 * has left) and admits locally until they are spent.
 *
 * @module
 */
import type { AuditedChange } from "./store_types.ts";

/** Whom a limit applies to: one API key, all keys of one user, or every key without its own. */
export type LimitScope = "key" | "user" | "default";
/** A rate (requests per window) or a quota (a total, refilled each period or never). */
export type LimitKind = "rate" | "quota";
/** A limit's window: rates use second to day; a quota also month (calendar, UTC) or none. */
export type LimitPeriod = "second" | "minute" | "hour" | "day" | "month" | "none";

export const LIMIT_SCOPES: readonly LimitScope[] = ["key", "user", "default"];
export const LIMIT_PERIODS: readonly LimitPeriod[] = [
  "second",
  "minute",
  "hour",
  "day",
  "month",
  "none",
];
/** The periods a rate may have. */
export const RATE_PERIODS: readonly LimitPeriod[] = ["second", "minute", "hour", "day"];

/** A stored limit. */
export interface LimitRule {
  id: number;
  scope: LimitScope;
  /** The key's id (scope `key`), the user's id (scope `user`), `null` for the default. */
  subjectId: number | null;
  kind: LimitKind;
  /** Requests allowed per window (0 refuses every request). */
  max: number;
  period: LimitPeriod;
  createdAt: number;
  updatedAt: number;
}

/** What `putLimit` stores. */
export interface NewLimit {
  scope: LimitScope;
  subjectId: number | null;
  kind: LimitKind;
  max: number;
  period: LimitPeriod;
}

/** A limit's window at some time: `[start, end)` in ms; a quota without refill never ends. */
export interface LimitWindow {
  start: number;
  end: number;
}

const PERIOD_MS: Partial<Record<LimitPeriod, number>> = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
};

/** The window of `period` that `now` falls in: fixed windows, aligned to the epoch (UTC). */
export function toLimitWindow(period: LimitPeriod, now: number): LimitWindow {
  const length = PERIOD_MS[period];
  if (length !== undefined) {
    const start = now - (now % length);
    return { start, end: start + length };
  }
  if (period === "month") {
    const date = new Date(now);
    const year = date.getUTCFullYear();
    const month = date.getUTCMonth();
    return { start: Date.UTC(year, month, 1), end: Date.UTC(year, month + 1, 1) };
  }
  return { start: 0, end: Number.POSITIVE_INFINITY };
}

/**
 * The most rotations a working key may be behind its chain's last key (whose limits and counters
 * the chain's keys use): `rotateKey` refuses a rotation that would put one further behind.
 */
export const MAX_ROTATION_CHAIN = 32;

/**
 * The most rotations the store's walk follows from a key to its chain's last: far past
 * {@link MAX_ROTATION_CHAIN}, for chains made before that bound (0.22 had none); a lease of a key
 * further behind (made by hand) fails rather than count the key against another chain's limits.
 */
export const MAX_CHAIN_WALK = 256;

/** The counter a limit keeps for a request: per user for a user's limit, else per key. */
export function toLimitSubject(rule: LimitRule, owner: LimitOwner): number {
  return rule.scope === "user" ? owner.userId : owner.apiKeyId;
}

/** The key a request came with, and its user. */
export interface LimitOwner {
  apiKeyId: number;
  userId: number;
}

/** What {@link LimitStore.leaseLimits} is asked. */
export interface LimitLeaseRequest extends LimitOwner {
  now: number;
  /**
   * How many units to take from `rule`'s window, given how many the window has used so far
   * (leases of every server included); called in the lease's transaction, once per rule. The
   * store grants at most what the window has left. With `ahead`, `used` is what the next
   * window has used so far (leased ahead of it).
   */
  want(rule: LimitRule, used: number): number;
  /**
   * Leases from the window after `now`'s instead (a thread's units for its next window, taken
   * before the boundary): the store counts them against that window, never the current one's.
   * A quota without refill grants nothing ahead.
   */
  ahead?: boolean;
}

/** One limit that applies to a lease's key: the units granted from its window. */
export interface LimitSlice {
  rule: LimitRule;
  /** The counter's subject: the user's id for a user's limit, else the key's. */
  subjectId: number;
  /** The window the units count against: `now`'s, or the one after it for an `ahead` lease. */
  window: LimitWindow;
  granted: number;
  /** Units the window has used once this lease is counted (at most `rule.max`, unless lowered). */
  used: number;
}

/** Units of a slice given back unspent (a server's shutdown, an idle slice). */
export interface LimitReturn {
  limitId: number;
  subjectId: number;
  /** The window they were leased from (the slice's): the counter's, or the one after it. */
  windowStart: number;
  units: number;
}

/** A limit and how much of its current window a key (or user) has used. */
export interface LimitUsage {
  rule: LimitRule;
  subjectId: number;
  window: LimitWindow;
  /**
   * Units leased in this window, ahead of it included (spent, or held unspent by a server for at
   * most a second).
   */
  used: number;
}

/** Which limits {@link LimitStore.listLimits} lists. */
export interface LimitFilter {
  scope?: LimitScope;
  subjectId?: number;
}

/** Limits and their counters. Part of `Store`. */
export interface LimitStore {
  /** Limits by scope (key, user, default), subject, kind, period. */
  listLimits(filter?: LimitFilter): Promise<LimitRule[]>;
  /**
   * Sets a limit: replaces the one of the same scope, subject, kind and period (its counter
   * stays), or, for a quota, the subject's quota of any period (its counter restarts). Records
   * the change in the grant change feed (`key`, `user`, or `all` for the default) so every
   * server reads the key's limits again. Resolves to the stored limit.
   */
  putLimit(limit: NewLimit, change: AuditedChange<LimitRule>): Promise<LimitRule>;
  /** Deletes a limit and its counters; resolves to it, or `undefined` if there was none. */
  deleteLimit(
    id: number,
    change: AuditedChange<LimitRule | undefined>,
  ): Promise<LimitRule | undefined>;
  /**
   * The limits that apply to each requested key (its own, else the default, per kind; and its
   * user's), each with units granted from its current window, answered in the order asked, all
   * in one transaction (or, for an `ahead` request, from the window after it): the sum of grants
   * in a window, leased in it or ahead of it, never exceeds the limit's `max`, also when
   * several requests of one batch share a counter (two keys of one user: the later one is
   * granted from what the earlier left). A window the store has already moved past (a server
   * whose clock lags) grants nothing. Not audited: bookkeeping, as key usage. A batch whose keys
   * have no limits is answered by a read alone (no write lock), so that such keys keep working
   * while another process holds the database's write lock.
   *
   * One call leases for many keys so that a thread's leases of many sparse keys cost one
   * transaction, not one each (the limiter coalesces them: src/auth/limit_batch.ts).
   */
  leaseLimits(requests: readonly LimitLeaseRequest[]): Promise<LimitSlice[][]>;
  /**
   * Gives unspent units back to their window, if the counter still holds it (its window, or the
   * one after it for units leased ahead); never below 0.
   */
  returnLimitUnits(units: readonly LimitReturn[]): Promise<void>;
  /** The limits that apply to a key (with `apiKeyId`) or a user's own (`userId` alone), used. */
  listLimitUsage(owner: { apiKeyId?: number; userId: number }, now: number): Promise<LimitUsage[]>;
}
