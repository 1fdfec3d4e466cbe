/**
 * Limits at the edge: the limiter's verdict on an authenticated request, kept in its context
 * for the response headers, and the IETF `RateLimit-Policy` / `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers-10: Structured Field lists of quoted policy names with
 * `q` quota and `w` window in seconds, and `r` remaining and `t` seconds to reset).
 *
 * @module
 */
import type { Limiter } from "../auth/limiter.ts";
import { LimitExceeded, type LimitPolicy, type LimitStatuses } from "../auth/limit_status.ts";
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
      // The limiter copies what it keeps of the owner: no object per request here.
      verdict = limiter.admit(owner);
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

/** A key's policies as fields: `RateLimit-Policy`'s value, and each item's start in `RateLimit`. */
interface RenderedPolicies {
  policy: string;
  items: string[];
}

/**
 * Rendered policies by the limiter's array of them, which stays the same object for a key while
 * its limits do: each response then builds only the `RateLimit` field's numbers.
 */
const rendered = new WeakMap<readonly LimitPolicy[], RenderedPolicies>();

function render(policies: readonly LimitPolicy[]): RenderedPolicies {
  let found = rendered.get(policies);
  if (found === undefined) {
    found = {
      policy: policies.map((limit) =>
        `"${limit.name}";q=${limit.max}` +
        (limit.windowSeconds === undefined ? "" : `;w=${limit.windowSeconds}`)
      ).join(", "),
      items: policies.map((limit, i) => `${i === 0 ? "" : ", "}"${limit.name}";r=`),
    };
    rendered.set(policies, found);
  }
  return found;
}

/** Sets the `RateLimit-Policy` and `RateLimit` fields of these statuses (none without limits). */
export function setRateLimitHeaders(headers: Headers, limits: LimitStatuses): void {
  const { policies, remaining, resetSeconds } = limits;
  if (policies.length === 0) return;
  const { policy, items } = render(policies);
  let current = "";
  for (let i = 0; i < items.length; i++) {
    const reset = resetSeconds[i];
    current += reset === undefined
      ? items[i] + remaining[i]
      : items[i] + remaining[i] + ";t=" + reset;
  }
  headers.set("ratelimit-policy", policy);
  headers.set("ratelimit", current);
}
