/**
 * The metrics listener's handler: the Prometheus scrape endpoint, on its
 * own port (see main.ts).
 *
 * @module
 */
import type { Metrics } from "../platform/metrics.ts";
import { splitRequestTarget } from "./paths.ts";

/**
 * The handler of the metrics listener: `GET /metrics` in Prometheus text
 * format, 404 for any other path, 405 for other methods.
 */
export function createMetricsHandler(metrics: Metrics): (request: Request) => Promise<Response> {
  return async (request) => {
    // Request.url holds the client's Host as sent, so it is not parsed as a URL.
    const { rawPath } = splitRequestTarget(request.url);
    if (rawPath !== "/metrics") return new Response("Not found\n", { status: 404 });
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("Method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } });
    }
    return new Response(request.method === "HEAD" ? null : await metrics.render(), {
      headers: { "content-type": metrics.contentType, "cache-control": "no-store" },
    });
  };
}
