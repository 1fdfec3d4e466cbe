/**
 * `/healthz` (the process answers) and `/readyz` (the store answers reads and
 * takes writes), on the public listener, for anyone (in proxy mode too: a
 * load balancer asks directly).
 *
 * @module
 */
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Store } from "../store/store.ts";
import { HttpError } from "./errors.ts";
import { CONTENT_TYPES } from "./respond.ts";

/** Liveness. */
export const HEALTH_PATH = "/healthz";
/** Readiness. */
export const READY_PATH = "/readyz";

/** Whether a canonical path is one of the health checks. */
export function isHealthPath(path: string): boolean {
  return path === HEALTH_PATH || path === READY_PATH;
}

/** What the health checks need. */
export interface HealthDeps {
  store: Pick<Store, "checkStoreReady" | "findWriteFailure">;
  logger: Logger;
  metrics: Pick<Metrics, "databaseError">;
}

function toJsonResponse(body: Record<string, string>, status: number): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": CONTENT_TYPES.json },
  });
}

/** Answers a health check at a path {@link isHealthPath} accepts. */
export type HealthCheck = (path: string, method: string) => Response | Promise<Response>;

/** Creates the health checks. */
export function createHealthCheck(deps: HealthDeps): HealthCheck {
  const { store, logger, metrics } = deps;

  async function checkReady(): Promise<Response> {
    let ready = false;
    let writeFailure: string | undefined;
    try {
      ready = await store.checkStoreReady();
      // Reads work; writes may not (disk full, read-only file system): logins would fail.
      if (ready) writeFailure = await store.findWriteFailure();
    } catch (error) {
      ready = false;
      metrics.databaseError("readiness");
      logger.error("readiness check failed", { error: String(error) });
    }
    if (!ready) return toJsonResponse({ status: "unavailable" }, 503);
    if (writeFailure !== undefined) {
      // The database's own words go to the operator's log, not to whoever can reach /readyz.
      logger.warn("readiness: writes fail", { error: writeFailure });
      return toJsonResponse({ status: "degraded", reason: "writes fail" }, 503);
    }
    return toJsonResponse({ status: "ready" }, 200);
  }

  return function answerHealth(path, method) {
    if (method !== "GET" && method !== "HEAD") {
      throw new HttpError(405, "method_not_allowed", `Method ${method} is not allowed: use GET`, {
        headers: { allow: "GET, HEAD, OPTIONS" },
      });
    }
    return path === HEALTH_PATH ? toJsonResponse({ status: "ok" }, 200) : checkReady();
  };
}
