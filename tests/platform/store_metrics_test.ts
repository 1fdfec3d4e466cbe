/** The store's metrics (src/platform/store_metrics.ts): the change-delay histogram. */
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { CHANGE_DELAY_BUCKETS, createStoreMetrics } from "../../src/platform/store_metrics.ts";

Deno.test("store metrics: change delays land in their buckets, in seconds", async () => {
  const metrics = createStoreMetrics();
  metrics.observeChangeDelay(1); // before registration: no histogram yet, nothing breaks
  const registry = new Registry();
  metrics.register(registry);
  metrics.observeChangeDelay(3);
  metrics.observeChangeDelay(700);
  const text = await registry.metrics();
  const sample = (series: string) =>
    Number(new RegExp(`^${series.replace(/[{}"+.]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1]);
  const bucket = (le: string) => sample(`keygate_store_change_delay_seconds_bucket{le="${le}"}`);
  assert.equal(bucket("0.002"), 0, text);
  assert.equal(bucket("0.005"), 1);
  assert.equal(bucket("0.5"), 1);
  assert.equal(bucket("1"), 2);
  assert.equal(bucket("+Inf"), 2);
  assert.equal(sample("keygate_store_change_delay_seconds_count"), 2);
  assert.equal(sample("keygate_store_change_delay_seconds_sum"), 0.703);
  assert.deepEqual(CHANGE_DELAY_BUCKETS, [...CHANGE_DELAY_BUCKETS].sort((a, b) => a - b));
});
