/**
 * The public listener's record of each request: one `request` line at info
 * level (never a secret: the query is redacted), the request metrics by route
 * pattern, and, for a failed request, the database-error and throttling
 * counters and one error line for a 5xx, with the request id.
 *
 * @module
 */
import { redactTarget } from "../platform/logger.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { StoreError } from "../store/errors.ts";
import type { HttpError } from "./errors.ts";
import type { HandlerContext } from "./request_context.ts";

const METHOD_LABELS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
]);

/** What the request log needs. */
export interface RequestLogOptions {
  logger: Logger;
  metrics: Pick<Metrics, "observeRequest" | "throttled" | "databaseError">;
  /**
   * Route patterns used as metric labels. A path not listed is labelled
   * `secure_other` or `other`, so raw paths never become labels.
   */
  routeLabels: ReadonlySet<string>;
}

/** The public listener's request log. */
export interface RequestLog {
  /** Counts and logs a failed request (before its error is rendered). */
  failed(error: HttpError, thrown: unknown, context: HandlerContext): void;
  /** Records a finished request: the metrics and the access log line. */
  finished(request: Request, context: HandlerContext, status: number, seconds: number): void;
}

/** Creates the request log. */
export function createRequestLog(options: RequestLogOptions): RequestLog {
  const { logger, metrics, routeLabels } = options;

  function toRouteLabel(context: HandlerContext): string {
    const target = context.target;
    if (target === undefined) return "other";
    if (routeLabels.has(target.path)) return target.path;
    return target.secure ? "secure_other" : "other";
  }

  return {
    failed(error, thrown, context) {
      if (thrown instanceof StoreError) metrics.databaseError("request");
      if (error.status === 429) {
        const route = toRouteLabel(context);
        metrics.throttled(route);
        logger.warn("request throttled", {
          event: "throttled",
          request_id: context.requestId,
          route,
          client: context.clientAddress,
        });
      }
      if (error.status >= 500) {
        logger.error("request failed", {
          request_id: context.requestId,
          error: error.status === 500 ? String(error.cause) : error.code,
        });
      }
    },
    finished(request, context, status, seconds) {
      const method = METHOD_LABELS.has(request.method) ? request.method : "other";
      metrics.observeRequest({ route: toRouteLabel(context), method, status }, seconds);
      if (!logger.enabled("info")) return;
      const { rawPath, search } = context;
      logger.info("request", {
        request_id: context.requestId,
        method: request.method,
        // The query only once the path was read (it may hold secrets, which are redacted).
        path: context.target === undefined ? rawPath.slice(0, 200) : redactTarget(rawPath, search),
        status,
        duration_ms: Math.round(seconds * 100_000) / 100,
        key_id: context.apiKeyId ?? null,
        client: context.clientAddress,
      });
    },
  };
}
