import assert from "node:assert/strict";
import { AggregatorRegistry, Histogram, Registry } from "prom-client";
import { createLatencyHistogram } from "../../src/platform/latency_histogram.ts";

const OPTIONS = { name: "t_seconds", help: "Test latency", buckets: [0.001, 0.01, 0.1] };
const SAMPLES: [string, string, number, number][] = [
  ["/a", "GET", 200, 0.0004],
  ["/a", "GET", 200, 0.001], // on a bound: counted in it, as prom-client does
  ["/a", "GET", 200, 0.05],
  ["/a", "GET", 404, 3],
  ["other", "POST", 500, 0.02],
];

/** The same samples through prom-client's own Histogram, the reference. */
function reference(samples = SAMPLES) {
  const registry = new Registry();
  const histogram = new Histogram({
    ...OPTIONS,
    labelNames: ["route", "method", "status"] as const,
    registers: [registry],
  });
  for (const [route, method, status, seconds] of samples) {
    histogram.observe({ route, method, status: String(status) }, seconds);
  }
  return registry;
}

function ours(samples = SAMPLES) {
  const registry = new Registry();
  const histogram = createLatencyHistogram(registry, OPTIONS);
  for (const [route, method, status, seconds] of samples) {
    histogram.observe(route, method, status, seconds);
  }
  return registry;
}

Deno.test("createLatencyHistogram() renders exactly what prom-client's Histogram renders", async () => {
  assert.equal(await ours().metrics(), await reference().metrics());
  assert.match(
    await ours().metrics(),
    /^t_seconds_count\{route="\/a",method="GET",status="200"\} 3$/m,
  );
});

Deno.test("createLatencyHistogram() sums over workers as prom-client's Histogram does", async () => {
  const half = SAMPLES.slice(0, 2);
  const mine = AggregatorRegistry.aggregate([
    await ours().getMetricsAsJSON(),
    await ours(half).getMetricsAsJSON(),
  ]);
  const theirs = AggregatorRegistry.aggregate([
    await reference().getMetricsAsJSON(),
    await reference(half).getMetricsAsJSON(),
  ]);
  assert.equal(await mine.metrics(), await theirs.metrics());
  assert.match(
    await mine.metrics(),
    /^t_seconds_count\{route="\/a",method="GET",status="200"\} 5$/m,
  );
});
