/**
 * Limits at the edge: the limiter's verdict on an authenticated request, kept in its context
 * for the response headers, and the IETF `RateLimit-Policy` / `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers-10: Structured Field lists of quoted policy names with
 * `q` quota and `w` window in seconds, and `r` remaining and `t` seconds to reset).
 *
 * @module
 */
import { type Limiter, LimitExceeded, type LimitStatus } from "../auth/limiter.ts";
import type { LimitOwner } from "../store/store.ts";
import type { RequestContext } from "./context.ts";

/** Admits a request for its key and user; sync while the units in hand last. */
export type AdmitLimits = (context: RequestContext, owner: LimitOwner) => void | Promise<void>;

/** The edge's admission over a thread's limiter: statuses kept in the request's context. */
export function createLimitAdmission(limiter: Pick<Limiter, "admit">): AdmitLimits {
  function refused(error: unknown, context: RequestContext): never {
    if (error instanceof LimitExceeded) context.limits = error.limits;
    throw error;
  }
  return function admitLimits(context, owner) {
    let verdict;
    try {
      verdict = limiter.admit({ apiKeyId: owner.apiKeyId, userId: owner.userId });
    } catch (error) {
      refused(error, context);
    }
    if (verdict instanceof Promise) {
      return verdict.then((statuses) => {
        context.limits = statuses;
      }, (error) => refused(error, context));
    }
    context.limits = verdict;
  };
}

/** The `RateLimit-Policy` and `RateLimit` fields of these statuses (none without limits). */
export function toRateLimitHeaders(limits: readonly LimitStatus[]): [string, string][] {
  if (limits.length === 0) return [];
  const policies = limits.map((limit) =>
    `"${limit.name}";q=${limit.max}` +
    (limit.windowSeconds === undefined ? "" : `;w=${limit.windowSeconds}`)
  );
  const current = limits.map((limit) =>
    `"${limit.name}";r=${limit.remaining}` +
    (limit.resetSeconds === undefined ? "" : `;t=${limit.resetSeconds}`)
  );
  return [["ratelimit-policy", policies.join(", ")], ["ratelimit", current.join(", ")]];
}
