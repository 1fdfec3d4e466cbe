/**
 * Brute-force throttling of the token endpoint, without lockout abuse.
 *
 * Two counters of failed logins, kept in SQLite so that they survive a
 * restart:
 *
 * - **Account**: per API key, counted only when the key is live and belongs to
 *   the (enabled) user whose e-mail was sent. The key determines the user, so
 *   this is the (API key, e-mail) counter. Someone without one of the user's
 *   keys can neither slow the user down nor learn from a 429 that an e-mail
 *   exists, and an unknown e-mail creates no row. A successful login clears it.
 * - **Client**: per client address (an IPv6 address counts as its /64), for
 *   every failed login whatever the e-mail or key. A success does not clear
 *   it, so that an attacker cannot reset it with an account of their own.
 *
 * After a rule's threshold of failures, each further failure blocks the
 * subject for a delay that doubles up to a cap: a progressive delay, never a
 * permanent lock. While blocked, logins get 429 with `Retry-After` without
 * the password being checked, so a correct and a wrong password get the same
 * answer. A counter is forgotten a window after its last failure.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { AuditEntries, LoginFailures, LoginFailuresRead, Store } from "../store/store.ts";
import { AuthError } from "./errors.ts";

/** How one counter grows and decays. */
export interface ThrottleRule {
  /** Failures after which each failure blocks the subject. */
  threshold: number;
  /** The block after the threshold-th failure; each further failure doubles it. */
  baseDelayMs: number;
  /** The longest block. */
  maxDelayMs: number;
  /** A counter is forgotten this long after its last failure. Must exceed `maxDelayMs`. */
  windowMs: number;
}

/** Failed logins per API key of the user: 5, then 1 s, 2 s, 4 s, … up to 15 min; kept 24 h. */
export const ACCOUNT_THROTTLE: ThrottleRule = {
  threshold: 5,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  windowMs: 24 * 3_600_000,
};

/** Failed logins per client address: 20, then 1 s, 2 s, 4 s, … up to 15 min; kept 1 h. */
export const CLIENT_THROTTLE: ThrottleRule = {
  threshold: 20,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  windowMs: 3_600_000,
};

/** The rules a throttle applies. */
export interface ThrottleRules {
  account: ThrottleRule;
  client: ThrottleRule;
}

/** The default rules. */
export const THROTTLE_RULES: ThrottleRules = { account: ACCOUNT_THROTTLE, client: CLIENT_THROTTLE };

/** Whom one login attempt counts against. */
export interface ThrottleSubjects {
  /** The client counter's subject; always present. */
  client: string;
  /** The account counter's subject, only when the key belongs to the e-mail's user. */
  account?: string;
}

/** Options for {@link createThrottle}. */
export interface ThrottleOptions {
  store: Store;
  clock: Clock;
  rules?: ThrottleRules;
}

/** The throttle of the token endpoint. */
export interface Throttle {
  /** @throws {AuthError} `too_many_attempts` with `retryAfterSeconds` while any subject is blocked. */
  check(subjects: ThrottleSubjects): Promise<void>;
  /**
   * What {@link Throttle.check} reads before the password check, asked of the login's first read
   * (`Store.findUserAndKey`) so that it costs no round trip of its own: the counter of the
   * client's `subject`, and the key's.
   */
  findReadFirst(client: string): LoginFailuresRead;
  /**
   * {@link Throttle.check} against the counters that read returned: only those of `subjects`
   * count (the key's only when `subjects.account` is set).
   * @throws {AuthError} as {@link Throttle.check}.
   */
  checkRead(subjects: ThrottleSubjects, read: { now: number; found: LoginFailures[] }): void;
  /** Counts a failed login against every subject, in one transaction with `audit`. */
  recordFailure(subjects: ThrottleSubjects, audit: AuditEntries): Promise<void>;
  /**
   * The counters a successful login forgets (the account's), for the
   * transaction that stores the new token (`Store.insertToken`).
   */
  findClearedOnSuccess(subjects: ThrottleSubjects): string[];
  /**
   * {@link Throttle.check} as part of the transaction that stores a successful login's token
   * (`Store.insertToken`'s `unlessBlocked`, which throws `StoreBlocked`): no round trip of its own.
   */
  findCheckedOnSuccess(subjects: ThrottleSubjects): { subjects: string[]; now: number };
  /** The error {@link Throttle.check} throws, for a login blocked until `blockedUntil`. */
  toBlockedError(blockedUntil: number): AuthError;
}

/** How the account counter's subject begins: the API key's id follows. */
const ACCOUNT_SUBJECT_PREFIX = "key:";

/** Subject of the account counter of an API key. */
export function toAccountSubject(apiKeyId: number): string {
  return `${ACCOUNT_SUBJECT_PREFIX}${apiKeyId}`;
}

/** Subject of the client counter of an address; an IPv6 address counts as its /64. */
export function toClientSubject(address: string): string {
  return `client:${toClientNetwork(address)}`.slice(0, 128);
}

/**
 * The unit of the client counter: an IPv4 address as it is (also when mapped
 * into IPv6), an IPv6 address as its /64 network, anything else as given.
 */
export function toClientNetwork(address: string): string {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "").toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(bare);
  if (mapped) return mapped[1];
  if (!bare.includes(":")) return bare;
  const halves = bare.split("::");
  if (halves.length > 2) return bare;
  const head = halves[0] === "" ? [] : halves[0].split(":");
  const tail = halves.length === 2 && halves[1] !== "" ? halves[1].split(":") : [];
  if (tail.some((group) => group.includes("."))) tail.splice(-1, 1, "0", "0"); // embedded IPv4
  const groups = halves.length === 2
    ? [...head, ...Array(Math.max(0, 8 - head.length - tail.length)).fill("0"), ...tail]
    : head;
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return bare;
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, "")).join(":")}::/64`;
}

/** The counter after one more failure at `now`. */
export function nextFailures(
  previous: LoginFailures | undefined,
  subject: string,
  rule: ThrottleRule,
  now: number,
): LoginFailures {
  const failures = (previous?.failures ?? 0) + 1;
  const blockedUntil = failures >= rule.threshold
    ? now + Math.min(rule.maxDelayMs, rule.baseDelayMs * 2 ** (failures - rule.threshold))
    : 0;
  return { subject, failures, lastFailureAt: now, blockedUntil, forgetAt: now + rule.windowMs };
}

/** The answer to a login blocked until `blockedUntil`, with the whole seconds left at `now` (≥ 1). */
function tooManyAttempts(blockedUntil: number, now: number): AuthError {
  return new AuthError(
    "too_many_attempts",
    "Too many failed logins: try again after the Retry-After delay",
    { retryAfterSeconds: Math.max(1, Math.ceil((blockedUntil - now) / 1000)) },
  );
}

/** @throws {AuthError} `too_many_attempts` when one of `rows` blocks logins at `now`. */
function throwIfBlocked(rows: readonly LoginFailures[], now: number): void {
  const blockedUntil = Math.max(0, ...rows.map((row) => row.blockedUntil));
  if (blockedUntil > now) throw tooManyAttempts(blockedUntil, now);
}

function subjectsOf(subjects: ThrottleSubjects): string[] {
  return subjects.account === undefined ? [subjects.client] : [subjects.client, subjects.account];
}

/** Creates the token endpoint's throttle over the store. */
export function createThrottle(options: ThrottleOptions): Throttle {
  const { store, clock } = options;
  const rules = options.rules ?? THROTTLE_RULES;
  for (const rule of [rules.account, rules.client]) {
    if (!(rule.threshold >= 1 && rule.windowMs > rule.maxDelayMs)) {
      throw new RangeError("Invalid throttle rule: threshold ≥ 1 and windowMs > maxDelayMs");
    }
  }
  const ruleOf = (subject: string) =>
    subject.startsWith(ACCOUNT_SUBJECT_PREFIX) ? rules.account : rules.client;

  return {
    async check(subjects) {
      const now = clock.now();
      throwIfBlocked(await store.findLoginFailures(subjectsOf(subjects), now), now);
    },
    findReadFirst(client) {
      return { subjects: [client], keySubjectPrefix: ACCOUNT_SUBJECT_PREFIX, now: clock.now() };
    },
    checkRead(subjects, { now, found }) {
      const counted = new Set(subjectsOf(subjects));
      throwIfBlocked(found.filter((row) => counted.has(row.subject)), now);
    },
    findCheckedOnSuccess(subjects) {
      return { subjects: subjectsOf(subjects), now: clock.now() };
    },
    toBlockedError(blockedUntil) {
      return tooManyAttempts(blockedUntil, clock.now());
    },
    async recordFailure(subjects, audit) {
      const now = clock.now();
      await store.recordLoginFailures(subjectsOf(subjects), {
        now,
        next: (previous, subject) => nextFailures(previous, subject, ruleOf(subject), now),
        audit,
      });
    },
    findClearedOnSuccess(subjects) {
      return subjects.account === undefined ? [] : [subjects.account];
    },
  };
}
