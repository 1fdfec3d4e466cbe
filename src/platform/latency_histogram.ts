/**
 * The request-latency histogram, observed on every request.
 *
 * prom-client's `Histogram#observe` converts, validates and hashes the label
 * object on every call; on a secure request that was a few percent of the
 * server's CPU time. This histogram keeps one series per route, method and
 * status in nested maps of plain counters and hands prom-client's registry
 * the same data a prom-client histogram would (`registerMetric` with the
 * documented `MetricObjectWithValues` shape), so the text format, the
 * aggregation over request workers and the metric's name stay as they were.
 *
 * @module
 */
import type { Registry } from "prom-client";

/** One sample as prom-client's registry reads it (`MetricValueWithName`). */
interface Sample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

interface Series {
  /** Observations per bucket (not cumulative); the last slot counts those above every bound. */
  counts: Float64Array;
  sum: number;
  count: number;
}

/** A histogram labelled by route, method and status. */
export interface LatencyHistogram {
  observe(route: string, method: string, status: number, seconds: number): void;
}

/**
 * Creates the histogram `name` with `buckets` (upper bounds, ascending) and
 * registers it in `registry`. `route` and `method` must come from small fixed
 * sets: each distinct value is a series.
 */
export function createLatencyHistogram(
  registry: Registry,
  options: { name: string; help: string; buckets: readonly number[] },
): LatencyHistogram {
  const { name, help, buckets } = options;
  const series = new Map<string, Map<string, Map<number, Series>>>();

  function toValues(): Sample[] {
    const values: Sample[] = [];
    for (const [route, byMethod] of series) {
      for (const [method, byStatus] of byMethod) {
        for (const [status, { counts, sum, count }] of byStatus) {
          const labels = { route, method, status: String(status) };
          let cumulative = 0;
          buckets.forEach((le, i) => {
            cumulative += counts[i];
            values.push({
              metricName: `${name}_bucket`,
              labels: { le, ...labels },
              value: cumulative,
            });
          });
          values.push(
            { metricName: `${name}_bucket`, labels: { le: "+Inf", ...labels }, value: count },
            { metricName: `${name}_sum`, labels, value: sum },
            { metricName: `${name}_count`, labels, value: count },
          );
        }
      }
    }
    return values;
  }

  // What the registry reads of a metric: its name, and get() for the rest (as a prom-client
  // histogram gives it: the type in lower case at run time, whatever the typings' enum says).
  const metric = {
    name,
    help,
    get: () =>
      Promise.resolve({ name, help, type: "histogram", aggregator: "sum", values: toValues() }),
    reset: () => series.clear(),
  };
  registry.registerMetric(metric as unknown as Parameters<Registry["registerMetric"]>[0]);

  return {
    observe(route, method, status, seconds) {
      let byMethod = series.get(route);
      if (byMethod === undefined) series.set(route, byMethod = new Map());
      let byStatus = byMethod.get(method);
      if (byStatus === undefined) byMethod.set(method, byStatus = new Map());
      let entry = byStatus.get(status);
      if (entry === undefined) {
        entry = { counts: new Float64Array(buckets.length + 1), sum: 0, count: 0 };
        byStatus.set(status, entry);
      }
      let i = 0;
      while (i < buckets.length && seconds > buckets[i]) i++;
      entry.counts[i]++;
      entry.sum += seconds;
      entry.count++;
    },
  };
}
