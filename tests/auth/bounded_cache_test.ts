import assert from "node:assert/strict";
import fc from "fast-check";
import { type CachePolicy, createBoundedCache } from "../../src/auth/bounded_cache.ts";

const POLICIES: CachePolicy[] = ["s3-fifo", "lru"];

/** A cache of `maxEntries` that records every eviction. */
function recording(policy: CachePolicy, maxEntries: number) {
  const evicted: [string, number][] = [];
  const cache = createBoundedCache<string, number>({
    maxEntries,
    policy,
    onEvict: (key, value) => evicted.push([key, value]),
  });
  return { cache, evicted };
}

Deno.test("createBoundedCache() refuses a size below 1 or not whole", () => {
  for (const maxEntries of [0, -1, 1.5, Number.NaN]) {
    assert.throws(() => createBoundedCache({ maxEntries }), RangeError);
  }
});

for (const policy of POLICIES) {
  Deno.test(`createBoundedCache(${policy}) get returns what set stored, and counts hits and misses`, () => {
    const { cache } = recording(policy, 4);
    assert.equal(cache.get("a"), undefined);
    cache.set("a", 1);
    cache.set("b", 2);
    assert.equal(cache.get("a"), 1);
    assert.equal(cache.get("b"), 2);
    cache.set("a", 10); // replaces, no new entry
    assert.equal(cache.get("a"), 10);
    assert.equal(cache.size, 2);
    assert.deepEqual([cache.hits, cache.misses, cache.evictions], [3, 1, 0]);
    assert.deepEqual(new Map(cache.entries()), new Map([["a", 10], ["b", 2]]));
  });

  Deno.test(`createBoundedCache(${policy}) never holds more than maxEntries, and onEvict is called once per evicted entry`, () => {
    const { cache, evicted } = recording(policy, 10);
    for (let i = 0; i < 1000; i++) {
      cache.set(`k${i}`, i);
      if (i % 3 === 0) cache.get(`k${i >> 1}`);
      assert.ok(cache.size <= 10);
    }
    assert.equal(cache.size, 10);
    assert.equal(cache.evictions, 990);
    assert.equal(evicted.length, 990);
    // Every key set is either held or was evicted exactly once, with its own value.
    const evictedKeys = new Set(evicted.map(([key]) => key));
    assert.equal(evictedKeys.size, 990);
    for (const [key, value] of evicted) {
      assert.equal(`k${value}`, key);
      assert.equal(cache.get(key), undefined);
    }
    for (const [key] of cache.entries()) assert.ok(!evictedKeys.has(key));
  });

  Deno.test(`createBoundedCache(${policy}) delete and clear remove entries without calling onEvict`, () => {
    const { cache, evicted } = recording(policy, 3);
    cache.set("a", 1);
    cache.set("b", 2);
    assert.equal(cache.delete("a"), true);
    assert.equal(cache.delete("a"), false);
    assert.equal(cache.get("a"), undefined);
    assert.equal(cache.size, 1);
    // The deleted entry's place is free: three more fit with one eviction (of b or c).
    cache.set("c", 3);
    cache.set("d", 4);
    assert.equal(evicted.length, 0);
    cache.set("e", 5);
    assert.equal(evicted.length, 1);
    assert.equal(cache.size, 3);
    cache.clear();
    assert.equal(cache.size, 0);
    assert.deepEqual([...cache.entries()], []);
    assert.equal(cache.get("d"), undefined);
    assert.equal(evicted.length, 1);
    // Usable after clear, counters kept.
    cache.set("f", 6);
    assert.equal(cache.get("f"), 6);
    assert.equal(cache.evictions, 1);
  });

  Deno.test(`createBoundedCache(${policy}) matches a model under any sequence of operations`, () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("set" as const), key: fc.nat(30), value: fc.nat() }),
      fc.record({ kind: fc.constant("get" as const), key: fc.nat(30) }),
      fc.record({ kind: fc.constant("delete" as const), key: fc.nat(30) }),
      fc.record({ kind: fc.constant("clear" as const) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(op, { maxLength: 300 }), (max, ops) => {
        const model = new Map<number, number>();
        let evictions = 0;
        const cache = createBoundedCache<number, number>({
          maxEntries: max,
          policy,
          onEvict: (key, value) => {
            // Only held entries are evicted, with their latest value, once.
            assert.equal(model.get(key), value);
            model.delete(key);
            evictions++;
          },
        });
        for (const o of ops) {
          if (o.kind === "set") {
            cache.set(o.key, o.value);
            model.set(o.key, o.value);
          } else if (o.kind === "get") {
            // A held key is found with its latest value; an evicted or deleted one is not.
            assert.equal(cache.get(o.key), model.get(o.key));
          } else if (o.kind === "delete") {
            assert.equal(cache.delete(o.key), model.delete(o.key));
          } else {
            cache.clear();
            model.clear();
          }
          assert.ok(cache.size <= max);
          assert.equal(cache.size, model.size);
          assert.equal(cache.evictions, evictions);
        }
      }),
    );
  });
}

Deno.test("createBoundedCache(lru) evicts the least recently used entry", () => {
  const { cache, evicted } = recording("lru", 3);
  cache.set("a", 1);
  cache.set("b", 2);
  cache.set("c", 3);
  cache.get("a"); // b is now the least recent
  cache.set("d", 4);
  assert.deepEqual(evicted, [["b", 2]]);
  cache.set("c", 30); // a set counts as a use: a is now the least recent
  cache.set("e", 5);
  assert.deepEqual(evicted, [["b", 2], ["a", 1]]);
});

Deno.test("createBoundedCache(s3-fifo) evicts keys used once before keys read again", () => {
  const { cache, evicted } = recording("s3-fifo", 10);
  // A hot set of 5, each read again after it was stored.
  for (let i = 0; i < 5; i++) cache.set(`hot${i}`, i);
  for (let i = 0; i < 5; i++) cache.get(`hot${i}`);
  // A scan of 100 keys used once: LRU would push the hot set out; S3-FIFO keeps it.
  for (let i = 0; i < 100; i++) cache.set(`scan${i}`, i);
  for (let i = 0; i < 5; i++) assert.equal(cache.get(`hot${i}`), i, `hot${i}`);
  assert.ok(evicted.every(([key]) => key.startsWith("scan")));
  assert.equal(evicted.length, 95);
});

Deno.test("createBoundedCache(s3-fifo) lets a key evicted lately back in past the small queue", () => {
  const { cache, evicted } = recording("s3-fifo", 10);
  // k0…k8 evicted (never read), in order; the ghost queue holds 9 (the main queue's share).
  for (let i = 0; i < 19; i++) cache.set(`k${i}`, i);
  assert.deepEqual(evicted.map(([key]) => key), Array.from({ length: 9 }, (_, i) => `k${i}`));
  cache.set("k0", 0); // its fingerprint is in the ghost queue: it enters main
  // A scan of keys used once now evicts from the small queue, never k0.
  for (let i = 100; i < 130; i++) cache.set(`k${i}`, i);
  assert.equal(cache.get("k0"), 0);
});

Deno.test("createBoundedCache(lru) evicts the hot set under a scan", () => {
  const { cache } = recording("lru", 10);
  for (let i = 0; i < 5; i++) cache.set(`hot${i}`, i);
  for (let i = 0; i < 5; i++) cache.get(`hot${i}`);
  for (let i = 0; i < 100; i++) cache.set(`scan${i}`, i);
  for (let i = 0; i < 5; i++) assert.equal(cache.get(`hot${i}`), undefined);
});

Deno.test("BoundedCache.peek() reads a value without counting a lookup or refreshing it (LRU)", () => {
  const cache = createBoundedCache<string, number>({ maxEntries: 2, policy: "lru" });
  cache.set("a", 1);
  cache.set("b", 2);
  assert.equal(cache.peek("a"), 1);
  assert.equal(cache.peek("z"), undefined);
  assert.equal(cache.hits + cache.misses, 0);
  // "a" is still the least recently used: the next entry evicts it, not "b".
  cache.set("c", 3);
  assert.equal(cache.peek("a"), undefined);
  assert.equal(cache.peek("b"), 2);
});
