/**
 * The in-memory caches' metrics (hits, misses, evictions, entries, hit ratio), read from the
 * caches' own counters at scrape time: nothing is counted per request here.
 *
 * @module
 */
import { Counter, Gauge, type Registry } from "prom-client";

/** The in-memory caches in front of the store, as /metrics names them. */
export type CacheName = "grant" | "key_holder" | "token_status";

/** What /metrics reads of a cache at scrape time. */
export interface WatchedCache {
  readonly hits: number;
  readonly misses: number;
  readonly evictions: number;
  readonly size: number;
}

/**
 * Registers the cache metrics; returns the function that watches a cache (its counters are
 * reported under `name` at every scrape from then on, summed with others of the same name).
 */
export function registerCacheMetrics(
  registers: Registry[],
): (name: CacheName, cache: WatchedCache) => void {
  const watched = new Map<CacheName, Set<WatchedCache>>();
  /** The sum of `field` over the caches watched under `name`. */
  const sumOf = (name: CacheName, field: keyof WatchedCache) =>
    [...watched.get(name) ?? []].reduce((sum, cache) => sum + cache[field], 0);
  new Counter({
    name: "keygate_cache_lookups_total",
    help: "Lookups of the in-memory caches in front of the store, by cache and hit or miss",
    labelNames: ["cache", "result"] as const,
    registers,
    collect() {
      this.reset();
      for (const cache of watched.keys()) {
        this.inc({ cache, result: "hit" }, sumOf(cache, "hits"));
        this.inc({ cache, result: "miss" }, sumOf(cache, "misses"));
      }
    },
  });
  new Counter({
    name: "keygate_cache_evictions_total",
    help: "Entries a cache's replacement policy evicted to stay within --grant-cache-size",
    labelNames: ["cache"] as const,
    registers,
    collect() {
      this.reset();
      for (const cache of watched.keys()) {
        this.inc({ cache }, sumOf(cache, "evictions"));
      }
    },
  });
  new Gauge({
    name: "keygate_cache_entries",
    help: "Entries held by a cache now (summed over request workers)",
    labelNames: ["cache"] as const,
    registers,
    collect() {
      for (const cache of watched.keys()) this.set({ cache }, sumOf(cache, "size"));
    },
  });
  new Gauge({
    name: "keygate_cache_hit_ratio",
    help: "Hits over lookups since start (the mean over request workers; for a window, " +
      "use rate() of keygate_cache_lookups_total)",
    labelNames: ["cache"] as const,
    registers,
    aggregator: "average",
    collect() {
      for (const cache of watched.keys()) {
        const hits = sumOf(cache, "hits");
        const lookups = hits + sumOf(cache, "misses");
        this.set({ cache }, lookups === 0 ? 0 : hits / lookups);
      }
    },
  });
  return (name, cache) => {
    let caches = watched.get(name);
    if (caches === undefined) watched.set(name, caches = new Set());
    caches.add(cache);
  };
}
