/**
 * The portal's throttle, on the token endpoint's counters and rules (../throttle.ts):
 * progressive delays that double up to a cap and are forgotten a window later, never a
 * permanent lock. Two counters per request: the client's address, and the e-mail sent (as a
 * digest, whether or not an account has it, so that a 429 tells nothing about accounts).
 * Sign-in counts failures; sign-up and forgot-password count every request (each one mails).
 *
 * @module
 */
import type { Clock } from "../../platform/clock.ts";
import type { Store } from "../../store/store.ts";
import { hashSecret } from "../credentials.ts";
import { AuthError } from "../errors.ts";
import { CLIENT_THROTTLE, nextFailures, type ThrottleRule, toClientNetwork } from "../throttle.ts";

/** Failed sign-ins per e-mail: 10, then 1 s, 2 s, … up to 15 min; kept 1 h. */
export const PORTAL_SIGN_IN_RULE: ThrottleRule = {
  threshold: 10,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  windowMs: 3_600_000,
};

/** Mail asked for per e-mail (sign-up, forgot): 5, then 1 min, 2 min, … up to 15 min; kept 1 h. */
export const PORTAL_MAIL_RULE: ThrottleRule = {
  threshold: 5,
  baseDelayMs: 60_000,
  maxDelayMs: 15 * 60_000,
  windowMs: 3_600_000,
};

/** The portal's rules. */
export interface PortalThrottleRules {
  signIn: ThrottleRule;
  mail: ThrottleRule;
  client: ThrottleRule;
}

export const PORTAL_THROTTLE_RULES: PortalThrottleRules = {
  signIn: PORTAL_SIGN_IN_RULE,
  mail: PORTAL_MAIL_RULE,
  client: CLIENT_THROTTLE,
};

/** What a request counts against. */
export type PortalCounter = "signIn" | "mail";

/** The portal's throttle. */
export interface PortalThrottle {
  /** @throws {AuthError} `too_many_attempts` while the client or the e-mail is blocked. */
  check(counter: PortalCounter, client: string, email: string): Promise<void>;
  /** Counts one against the client and the e-mail. */
  count(counter: PortalCounter, client: string, email: string): Promise<void>;
}

function subjectsOf(counter: PortalCounter, client: string, email: string): [string, string] {
  const digest = Buffer.from(hashSecret(`portal:${email}`)).toString("hex").slice(0, 32);
  return [
    `portal-client:${toClientNetwork(client)}`.slice(0, 128),
    `portal-${counter === "signIn" ? "login" : "mail"}:${digest}`,
  ];
}

export function createPortalThrottle(
  deps: { store: Store; clock: Clock; rules?: PortalThrottleRules },
): PortalThrottle {
  const rules = deps.rules ?? PORTAL_THROTTLE_RULES;
  return {
    async check(counter, client, email) {
      const now = deps.clock.now();
      const rows = await deps.store.findLoginFailures(subjectsOf(counter, client, email), now);
      const blockedUntil = Math.max(0, ...rows.map((row) => row.blockedUntil));
      if (blockedUntil > now) {
        throw new AuthError(
          "too_many_attempts",
          "Too many attempts: try again after the Retry-After delay",
          {
            retryAfterSeconds: Math.max(1, Math.ceil((blockedUntil - now) / 1000)),
          },
        );
      }
    },
    async count(counter, client, email) {
      const now = deps.clock.now();
      const [clientSubject] = subjectsOf(counter, client, email);
      await deps.store.recordLoginFailures(subjectsOf(counter, client, email), {
        now,
        next: (previous, subject) =>
          nextFailures(
            previous,
            subject,
            subject === clientSubject ? rules.client : rules[counter],
            now,
          ),
        audit: undefined,
      });
    },
  };
}
