/**
 * What the limiter tells the edge about a request's limits, for its `RateLimit-Policy` and
 * `RateLimit` headers: each limit's policy (an object that stays the same while the limit and
 * its window's length do, so the edge renders its text once), and per request what each limit
 * had left; and the refusal, {@link LimitExceeded}.
 *
 * @module
 */
import type { LimitKind, LimitRule } from "../store/store.ts";
import { AuthError } from "./errors.ts";

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

/** No limits: nothing to report. */
export const NO_LIMITS: LimitStatuses = Object.freeze({
  policies: Object.freeze([]),
  remaining: Object.freeze([]),
  resetSeconds: Object.freeze([]),
});

/** A limit's window, as far as its policy tells it. */
export interface PolicyWindow {
  rule: LimitRule;
  windowStart: number;
  /** `Infinity` for a quota that never refills. */
  windowEnd: number;
}

/** The policy of a limit in a window: `was` again unless the rule or the window's length changed. */
export function toLimitPolicy(window: PolicyWindow, was?: LimitPolicy): LimitPolicy {
  const { rule } = window;
  const windowSeconds = Number.isFinite(window.windowEnd)
    ? Math.round((window.windowEnd - window.windowStart) / 1000)
    : undefined;
  const name = `${rule.scope}-${rule.kind}-${rule.period}`;
  if (
    was !== undefined && was.name === name && was.max === rule.max &&
    was.windowSeconds === windowSeconds
  ) {
    return was;
  }
  return Object.freeze({ name, kind: rule.kind, max: rule.max, windowSeconds });
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
