/**
 * Compares the grant cache's replacement policies (src/auth/bounded_cache.ts: S3-FIFO and LRU)
 * with the cache keygate had before them (a Map emptied whenever it is full), on Zipf-like
 * traces with a working set larger than the cache, and measures what one cached grant costs
 * in memory. In process, no server: a guide for choosing the policy, printed as Markdown.
 *
 *     deno run --v8-flags=--expose-gc --allow-read --allow-env --allow-ffi --allow-sys \
 *       scripts/bench/cache_policy.ts [--keys 200000] [--capacity 100000] [--requests 3000000]
 *
 * Each trace: `--keys` distinct keys (token + API key strings, as the grant cache keys them),
 * popularity Zipf(α) over a random permutation, `--requests` lookups; a miss stores the key
 * (as the grant cache does after reading the store). The first third of each trace warms the
 * cache and is not counted (a cold cache's first sight of each key is a miss under any policy).
 * "Hot set share" is the share of requests that go to the `--capacity` most popular keys: what
 * a cache that always held exactly those would hit. The "churn" traces replace a share of the lookups with keys never seen again
 * (fresh logins, scans), the load that pushes LRU's hot set out.
 *
 * @module
 */
import { parseArgs } from "node:util";
import {
  type BoundedCache,
  type CachePolicy,
  createBoundedCache,
} from "../../src/auth/bounded_cache.ts";
import { generateApiKey, generateToken } from "../../src/auth/credentials.ts";
import type { TokenGrant } from "../../src/store/store.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    keys: { type: "string", default: "200000" },
    capacity: { type: "string", default: "100000" },
    requests: { type: "string", default: "3000000" },
    seed: { type: "string", default: "1" },
    memory: { type: "string" },
  },
});
const KEYS = Number(values.keys);
const CAPACITY = Number(values.capacity);
const REQUESTS = Number(values.requests);

/** A small seeded PRNG (mulberry32), so that every contender sees the same trace. */
function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A trace of key indexes: Zipf(alpha) over `keys`, with `churn` of it keys seen once. */
function makeTrace(alpha: number, churn: number, seed: number) {
  const random = createRandom(seed);
  const cdf = new Float64Array(KEYS);
  let sum = 0;
  for (let rank = 0; rank < KEYS; rank++) cdf[rank] = sum += 1 / Math.pow(rank + 1, alpha);
  for (let rank = 0; rank < KEYS; rank++) cdf[rank] /= sum;
  const hotShare = cdf[Math.min(CAPACITY, KEYS) - 1];
  // Rank → key index: a random permutation, so that popularity does not follow insertion order.
  const keyOfRank = Int32Array.from({ length: KEYS }, (_, i) => i);
  for (let i = KEYS - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [keyOfRank[i], keyOfRank[j]] = [keyOfRank[j], keyOfRank[i]];
  }
  const trace = new Int32Array(REQUESTS);
  let once = KEYS; // indexes ≥ KEYS are keys seen once
  for (let i = 0; i < REQUESTS; i++) {
    if (churn > 0 && random() < churn) {
      trace[i] = once++;
      continue;
    }
    const u = random();
    let lo = 0;
    let hi = KEYS - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    trace[i] = keyOfRank[lo];
  }
  return { trace, hotShare: hotShare * (1 - churn), distinct: once };
}

/** The cache keygate had before: a Map emptied whenever it reaches its size. */
function createClearingCache<K, V>(maxEntries: number): BoundedCache<K, V> {
  const map = new Map<K, V>();
  const counters = { hits: 0, misses: 0, evictions: 0 };
  return {
    get hits() {
      return counters.hits;
    },
    get misses() {
      return counters.misses;
    },
    get evictions() {
      return counters.evictions;
    },
    get size() {
      return map.size;
    },
    maxEntries,
    peek: (key) => map.get(key),
    get(key) {
      const value = map.get(key);
      if (value === undefined) counters.misses++;
      else counters.hits++;
      return value;
    },
    set(key, value) {
      if (map.size >= maxEntries) {
        counters.evictions += map.size;
        map.clear();
      }
      map.set(key, value);
    },
    delete: (key) => map.delete(key),
    clear: () => map.clear(),
    entries: () => map.entries(),
  };
}

const GRANT: TokenGrant = Object.freeze({
  tokenId: 1,
  userId: 1,
  email: "someone@example.org",
  apiKeyId: 1,
  issuedAt: 0,
  expiresAt: 0,
  keyExpiresAt: null,
});

const contenders: Record<string, () => BoundedCache<string, TokenGrant>> = {
  "S3-FIFO": () => createBoundedCache({ maxEntries: CAPACITY, policy: "s3-fifo" as CachePolicy }),
  LRU: () => createBoundedCache({ maxEntries: CAPACITY, policy: "lru" }),
  "Map, emptied when full (before)": () => createClearingCache(CAPACITY),
};

const traces = [
  { name: "Zipf α 0.8", alpha: 0.8, churn: 0 },
  { name: "Zipf α 1.0", alpha: 1.0, churn: 0 },
  { name: "Zipf α 0.8, 20% churn", alpha: 0.8, churn: 0.2 },
];

/** A grant cache key as a request's would be: API key and token, one flat string. */
const makeKey = (apiKey: string) => JSON.parse(JSON.stringify(apiKey + generateToken())) as string;

// --- Memory per entry (`--memory NAME`: one contender, in a process of its own) -------------
if (values.memory !== undefined) {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");
  const heap = () => {
    for (let i = 0; i < 3; i++) gc();
    return Deno.memoryUsage().heapUsed;
  };
  const n = CAPACITY;
  const keys = Array.from({ length: n }, () => makeKey(generateApiKey()));
  const start = heap();
  const grants = keys.map((_, i) =>
    Object.freeze({ ...GRANT, tokenId: i, email: `user${i}@example.org` })
  );
  const withGrants = heap();
  const cache = contenders[values.memory]();
  for (let i = 0; i < n; i++) cache.set(keys[i], grants[i]);
  const filled = heap();
  if (cache.size !== n) throw new Error("the cache did not keep every entry");
  // Key strings: measured apart (the cache holds them; the request made them).
  const more = Array.from({ length: n }, () => makeKey(generateApiKey()));
  const withKeys = heap();
  console.log(JSON.stringify({
    grant: (withGrants - start) / n,
    structure: (filled - withGrants) / n,
    key: (withKeys - filled) / more.length,
  }));
  Deno.exit(0);
}

const apiKey = generateApiKey();
const keyNames: string[] = [];
const keyName = (index: number) => {
  while (keyNames.length <= index) keyNames.push(makeKey(apiKey));
  return keyNames[index];
};

const lines: string[] = [];
for (const spec of traces) {
  const { trace, hotShare, distinct } = makeTrace(spec.alpha, spec.churn, Number(values.seed));
  keyName(distinct - 1);
  lines.push(
    `- ${spec.name}: ${KEYS.toLocaleString("en")} keys, cache ${CAPACITY.toLocaleString("en")}, ` +
      `${REQUESTS.toLocaleString("en")} lookups; hot set share ${(hotShare * 100).toFixed(1)}%`,
  );
  for (const [name, make] of Object.entries(contenders)) {
    const results: { ratio: number; ns: number }[] = [];
    for (let round = 0; round < 3; round++) {
      const cache = make();
      const warm = Math.floor(trace.length / 3);
      for (let i = 0; i < warm; i++) {
        const key = keyNames[trace[i]];
        if (cache.get(key) === undefined) cache.set(key, GRANT);
      }
      const [hits, misses] = [cache.hits, cache.misses];
      const started = performance.now();
      for (let i = warm; i < trace.length; i++) {
        const key = keyNames[trace[i]];
        if (cache.get(key) === undefined) cache.set(key, GRANT);
      }
      const ns = (performance.now() - started) * 1e6 / (trace.length - warm);
      const counted = cache.hits - hits + cache.misses - misses;
      results.push({ ratio: (cache.hits - hits) / counted, ns });
    }
    results.sort((a, b) => a.ns - b.ns);
    const median = results[1];
    lines.push(
      `  - ${name}: hit ratio **${(median.ratio * 100).toFixed(1)}%**, ` +
        `${median.ns.toFixed(0)} ns per lookup (median of 3; a miss includes its set)`,
    );
  }
}

// --- Memory per entry: each contender in a process of its own -------------------------------
lines.push(
  `- memory, ${CAPACITY.toLocaleString("en")} grant entries (bytes of V8 heap per entry):`,
);
for (const name of Object.keys(contenders)) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--v8-flags=--expose-gc",
      "--allow-read",
      "--allow-env",
      "--allow-ffi",
      "--allow-sys",
      new URL(import.meta.url).pathname,
      "--capacity",
      String(CAPACITY),
      "--memory",
      name,
    ],
    stdout: "piped",
  }).output();
  const bytes = JSON.parse(new TextDecoder().decode(output.stdout));
  lines.push(
    `  - ${name}: the cache's own structure ${bytes.structure.toFixed(0)} B; the grant object ` +
      `${bytes.grant.toFixed(0)} B; the key string (API key + token) ${bytes.key.toFixed(0)} B`,
  );
}
console.log(lines.join("\n"));
