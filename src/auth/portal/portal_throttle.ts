/**
 * The portal's throttle, on the token endpoint's counters and rules (../throttle.ts):
 * progressive delays that double up to a cap and are forgotten a window later, never a
 * permanent lock, and, as there, nobody but the holder of a credential can lock its owner out.
 * Counters (the e-mail always as a digest, whether or not an account has it, so that a 429
 * tells nothing about accounts; an HMAC keyed with the portal secret, so that whoever reads the
 * database cannot test a guessed address against them; an account deleted by its owner takes
 * its counters with it, {@link PortalThrottle.countersOf}, while an operator's deletion, a
 * refusal and the janitor's expiry, which hold no portal key, leave them to age out):
 *
 * - **client**: the client's address (an IPv6 address as its /64), for every failure and mail;
 * - **e-mail × network**: failed sign-ins and codes per (e-mail, client network: an IPv4
 *   address as its /24, an IPv6 one as its /64); this is the counter that blocks a guesser,
 *   and strangers on other networks do not share it with the owner;
 * - **e-mail ceiling**: failed sign-ins per e-mail from every network, much higher and with
 *   short delays, against a guesser spread over many networks; it never holds back a client
 *   the address has signed in from (a **known** client: a marker kept 30 days after each
 *   successful sign-in or verification, for the exact IPv4 address or the IPv6 /64, never a
 *   whole IPv4 /24, which strangers on the same ISP or campus share), so strangers can slow
 *   down only newcomers;
 * - **mail × network**: mail asked for (sign-up, forgot-password, change of address) per
 *   (e-mail, client network), which protects the inbox from one network; strangers on other
 *   networks do not share it with the owner;
 * - **mail ceiling**: mail asked for per e-mail from every network, higher, against a flood
 *   spread over many networks; like the sign-in ceiling it never holds back a known client.
 *
 * Codes (verification, reset) count on the client and e-mail × network counters only: a
 * spread-out guesser is bounded by a code's ~49 bits and short life, a reset code's few wrong
 * tries (codes.ts) and, at verification, the candidate's password a match needs too. A ceiling
 * there would let strangers block a verification, which no known client exempts yet.
 *
 * Callers check before their slow password check and again after it (requests in flight
 * together all pass the first check), and count a failure after the second.
 *
 * @module
 */
import type { Clock } from "../../platform/clock.ts";
import type { LoginFailures, Store } from "../../store/store.ts";
import { createHmac } from "node:crypto";
import { AuthError } from "../errors.ts";
import { CLIENT_THROTTLE, nextFailures, type ThrottleRule, toClientNetwork } from "../throttle.ts";

/** Failed sign-ins and codes per (e-mail, network): 10, then 1 s, 2 s, … up to 15 min; kept 1 h. */
export const PORTAL_SIGN_IN_RULE: ThrottleRule = {
  threshold: 10,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  windowMs: 3_600_000,
};

/**
 * Failed sign-ins per e-mail from every network: 100, then 1 s, 2 s, … up to 1 min; kept 1 h.
 * Known clients are exempt.
 */
export const PORTAL_SIGN_IN_CEILING_RULE: ThrottleRule = {
  threshold: 100,
  baseDelayMs: 1000,
  maxDelayMs: 60_000,
  windowMs: 3_600_000,
};

/**
 * Mail asked for per (e-mail, network) (sign-up, forgot, change of address): 5, then 1 min,
 * 2 min, … up to 15 min; kept 1 h.
 */
export const PORTAL_MAIL_RULE: ThrottleRule = {
  threshold: 5,
  baseDelayMs: 60_000,
  maxDelayMs: 15 * 60_000,
  windowMs: 3_600_000,
};

/**
 * Mail asked for per e-mail from every network: 20, then 1 min, 2 min, … up to 15 min; kept
 * 1 h. Known clients are exempt.
 */
export const PORTAL_MAIL_CEILING_RULE: ThrottleRule = {
  threshold: 20,
  baseDelayMs: 60_000,
  maxDelayMs: 15 * 60_000,
  windowMs: 3_600_000,
};

/** How long a client stays known after the address last signed in from it. */
export const PORTAL_KNOWN_NETWORK_MS = 30 * 24 * 3_600_000;

/** The portal's rules. */
export interface PortalThrottleRules {
  /** Per (e-mail, network): failed sign-ins, codes and current-password checks. */
  signIn: ThrottleRule;
  /** Per e-mail from every network: failed sign-ins (not codes); known clients exempt. */
  signInCeiling?: ThrottleRule;
  /** Per (e-mail, network): mail asked for. */
  mail: ThrottleRule;
  /** Per e-mail from every network: mail asked for; known clients exempt. */
  mailCeiling?: ThrottleRule;
  /** Per client address. */
  client: ThrottleRule;
}

export const PORTAL_THROTTLE_RULES: PortalThrottleRules = {
  signIn: PORTAL_SIGN_IN_RULE,
  signInCeiling: PORTAL_SIGN_IN_CEILING_RULE,
  mail: PORTAL_MAIL_RULE,
  mailCeiling: PORTAL_MAIL_CEILING_RULE,
  client: CLIENT_THROTTLE,
};

/**
 * What a request counts against: `signIn` (a password), `code` (a mailed code) or `mail` (a
 * request that mails).
 */
export type PortalCounter = "signIn" | "code" | "mail";

/** The portal's throttle. */
export interface PortalThrottle {
  /** @throws {AuthError} `too_many_attempts` while a counter of the request blocks it. */
  check(counter: PortalCounter, client: string, email: string): Promise<void>;
  /** Counts one against the request's counters. */
  count(counter: PortalCounter, client: string, email: string): Promise<void>;
  /**
   * A successful sign-in or verification from `client`: the client (its IPv4 address, its IPv6
   * /64) becomes known for `email` (exempt from the e-mail's sign-in and mail ceilings), and its
   * e-mail × network sign-in counter is forgotten.
   */
  succeeded(client: string, email: string): Promise<void>;
  /**
   * The subject prefixes of every counter of `email` (of any client or network): a deletion of
   * its account forgets them (`AuditAnonymizing.forgetCounters`).
   */
  countersOf(email: string): string[];
}

/**
 * The network of the e-mail × network counter: an IPv4 address (also mapped into IPv6) as its
 * /24, an IPv6 address as its /64, anything else as given.
 */
export function toPortalNetwork(address: string): string {
  const network = toClientNetwork(address);
  const ipv4 = /^(\d{1,3}\.\d{1,3}\.\d{1,3})\.\d{1,3}$/.exec(network);
  return ipv4 ? `${ipv4[1]}.0/24` : network;
}

/** The e-mail's part of its counters' subjects: keyed, so that only the portal can compute it. */
function toEmailDigest(key: Uint8Array, email: string): string {
  return createHmac("sha256", key).update(`portal:${email}`).digest("hex").slice(0, 32);
}

/** The counters' subjects of one request. */
function subjectsOf(key: Uint8Array, client: string, email: string) {
  const digest = toEmailDigest(key, email);
  const network = toPortalNetwork(client);
  return {
    client: `portal-client:${toClientNetwork(client)}`.slice(0, 128),
    pair: `portal-login:${digest}:${network}`.slice(0, 128),
    ceiling: `portal-login-all:${digest}`,
    mail: `portal-mail:${digest}:${network}`.slice(0, 128),
    mailCeiling: `portal-mail-all:${digest}`,
    // The client counter's unit, not the /24: a neighbour is no known client.
    known: `portal-known:${digest}:${toClientNetwork(client)}`.slice(0, 128),
  };
}

function tooManyAttempts(blockedUntil: number, now: number): AuthError {
  return new AuthError(
    "too_many_attempts",
    "Too many attempts: try again after the Retry-After delay",
    { retryAfterSeconds: Math.max(1, Math.ceil((blockedUntil - now) / 1000)) },
  );
}

/**
 * The portal's throttle on `store`; `key` is the portal secret (`--portal-secret-file`, the
 * codes' key), which keys the e-mail's digest in the counters' subjects.
 */
export function createPortalThrottle(
  deps: { store: Store; clock: Clock; key: Uint8Array; rules?: PortalThrottleRules },
): PortalThrottle {
  const rules = deps.rules ?? PORTAL_THROTTLE_RULES;
  const ceilingRule = rules.signInCeiling ?? PORTAL_SIGN_IN_CEILING_RULE;
  const mailCeilingRule = rules.mailCeiling ?? PORTAL_MAIL_CEILING_RULE;
  /** The store takes two subjects a call: the blocking pair, then the exempted one and its marker. */
  const readsOf = (counter: PortalCounter, client: string, email: string) => {
    const s = subjectsOf(deps.key, client, email);
    if (counter === "code") return { blocking: [s.client, s.pair], exempted: [] };
    if (counter === "mail") {
      return { blocking: [s.client, s.mail], exempted: [s.mailCeiling, s.known] };
    }
    return { blocking: [s.client, s.pair], exempted: [s.ceiling, s.known] };
  };
  return {
    async check(counter, client, email) {
      const now = deps.clock.now();
      const { blocking, exempted } = readsOf(counter, client, email);
      const [held, exemptable] = await Promise.all([
        deps.store.findLoginFailures(blocking, now),
        deps.store.findLoginFailures(exempted, now),
      ]);
      const known = exemptable.some((row) => row.subject.startsWith("portal-known:"));
      const rows: LoginFailures[] = known
        ? held
        : [...held, ...exemptable.filter((row) => !row.subject.startsWith("portal-known:"))];
      const blockedUntil = Math.max(0, ...rows.map((row) => row.blockedUntil));
      if (blockedUntil > now) throw tooManyAttempts(blockedUntil, now);
    },
    async count(counter, client, email) {
      const now = deps.clock.now();
      const s = subjectsOf(deps.key, client, email);
      const ruleOf = (subject: string) =>
        subject === s.client
          ? rules.client
          : subject === s.pair
          ? rules.signIn
          : subject === s.ceiling
          ? ceilingRule
          : subject === s.mailCeiling
          ? mailCeilingRule
          : rules.mail;
      const record = (subjects: string[]) =>
        deps.store.recordLoginFailures(subjects, {
          now,
          next: (previous, subject) => nextFailures(previous, subject, ruleOf(subject), now),
          audit: undefined,
        });
      if (counter === "mail") await record([s.client, s.mail]);
      else await record([s.client, s.pair]);
      if (counter === "signIn") await record([s.ceiling]);
      if (counter === "mail") await record([s.mailCeiling]);
    },
    async succeeded(client, email) {
      const now = deps.clock.now();
      const s = subjectsOf(deps.key, client, email);
      await deps.store.recordLoginFailures([s.pair, s.known], {
        now,
        // The pair's counter is forgotten at once (and pruned later); the marker is kept, and
        // counts the sign-ins (the column holds a count of at least 1).
        next: (previous, subject) => ({
          subject,
          failures: subject === s.known ? (previous?.failures ?? 0) + 1 : 1,
          lastFailureAt: now,
          blockedUntil: 0,
          forgetAt: subject === s.known ? now + PORTAL_KNOWN_NETWORK_MS : now,
        }),
        audit: undefined,
      });
    },
    countersOf(email) {
      const digest = toEmailDigest(deps.key, email);
      // Each ends where the digest does (the per-network ones with the ":" before the network).
      return ["portal-login", "portal-login-all", "portal-mail", "portal-mail-all", "portal-known"]
        .map((kind) => kind.endsWith("-all") ? `${kind}:${digest}` : `${kind}:${digest}:`);
    },
  };
}
