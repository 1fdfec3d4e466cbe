/**
 * A cache bounded by entries, with a replacement policy that keeps a working set larger than
 * the cache serving its hot part instead of emptying itself when full.
 *
 * Two policies, behind one interface:
 *
 * - **S3-FIFO** (the default; Yang et al., SOSP 2023): a small FIFO queue (a tenth of the
 *   entries) that new keys enter, a main FIFO queue (the rest), and a ghost queue of recently
 *   evicted keys' fingerprints. A hit only raises the entry's 2-bit frequency (no list moves).
 *   An entry leaving the small queue moves to main if it was read again meanwhile, or else is
 *   evicted (its fingerprint kept in the ghost); a key seen in the ghost enters main directly.
 *   An entry leaving main is put back with its frequency lowered by one while it is above 0.
 *   One-hit wonders (a scan, a long tail of tokens used once) leave through the small queue
 *   and never push the hot set out.
 * - **LRU**: a doubly linked list in recency order; a hit moves the entry to the front.
 *
 * scripts/bench/cache_policy.ts compares them (and the old "empty it when full") on Zipf-like
 * traces; docs/performance.md ("Grant cache policy") records why S3-FIFO is the default.
 *
 * A cache never evicts on its own but to stay within `maxEntries`; {@link BoundedCache.delete}
 * and {@link BoundedCache.clear} are its owner's and do not call `onEvict`.
 *
 * @module
 */

/** Counters of a cache since it was made. */
export interface CacheCounters {
  /** `get` calls that found the key. */
  hits: number;
  /** `get` calls that did not. */
  misses: number;
  /** Entries the policy removed to stay within `maxEntries` (not `delete` or `clear`). */
  evictions: number;
}

/** A cache bounded by entries. */
export interface BoundedCache<K, V> extends Readonly<CacheCounters> {
  /** The value under `key` (counted as a hit or a miss), or undefined. */
  get(key: K): V | undefined;
  /** The value under `key` without counting a lookup or touching the policy's state. */
  peek(key: K): V | undefined;
  /** Stores `value` under `key`, evicting by the policy when the cache is full. */
  set(key: K, value: V): void;
  /** Removes `key`; true when it was there. Never calls `onEvict`. */
  delete(key: K): boolean;
  /** Removes every entry (the counters stay). Never calls `onEvict`. */
  clear(): void;
  /** Entries held now. */
  readonly size: number;
  /** The most entries it holds. */
  readonly maxEntries: number;
  /** Every entry, in no promised order (do not change the cache while iterating). */
  entries(): IterableIterator<[K, V]>;
}

/** The replacement policies {@link createBoundedCache} offers. */
export type CachePolicy = "s3-fifo" | "lru";

/** Options for {@link createBoundedCache}. */
export interface BoundedCacheOptions<K, V> {
  /** The most entries held (at least 1). */
  maxEntries: number;
  /** The replacement policy; `"s3-fifo"` unless told. */
  policy?: CachePolicy;
  /** Called once for each entry the policy evicts, after it is gone. */
  onEvict?: (key: K, value: V) => void;
}

/** An entry and its place in one of the policy's lists. */
interface Node<K, V> {
  key: K;
  value: V;
  /** S3-FIFO: reads since it entered its queue, capped at 3; LRU: unused. */
  freq: number;
  /** S3-FIFO: whether it is in the main queue (else the small one). */
  main: boolean;
  prev: Node<K, V> | undefined;
  next: Node<K, V> | undefined;
}

/** A doubly linked list: `head` is the oldest (or least recent), `tail` the newest. */
class List<K, V> {
  head: Node<K, V> | undefined;
  tail: Node<K, V> | undefined;
  length = 0;

  push(node: Node<K, V>): void {
    node.prev = this.tail;
    node.next = undefined;
    if (this.tail === undefined) this.head = node;
    else this.tail.next = node;
    this.tail = node;
    this.length++;
  }

  unlink(node: Node<K, V>): void {
    if (node.prev === undefined) this.head = node.next;
    else node.prev.next = node.next;
    if (node.next === undefined) this.tail = node.prev;
    else node.next.prev = node.prev;
    node.prev = node.next = undefined;
    this.length--;
  }

  shift(): Node<K, V> | undefined {
    const node = this.head;
    if (node !== undefined) this.unlink(node);
    return node;
  }

  clear(): void {
    this.head = this.tail = undefined;
    this.length = 0;
  }
}

/** Creates a bounded cache with the given policy. */
export function createBoundedCache<K, V>(options: BoundedCacheOptions<K, V>): BoundedCache<K, V> {
  if (!Number.isInteger(options.maxEntries) || options.maxEntries < 1) {
    throw new RangeError(`maxEntries must be a whole number ≥ 1, not ${options.maxEntries}`);
  }
  return (options.policy ?? "s3-fifo") === "lru" ? new LruCache(options) : new S3FifoCache(options);
}

/** What both policies share: the index, the counters, delete and clear. */
abstract class Base<K, V> implements BoundedCache<K, V> {
  hits = 0;
  misses = 0;
  evictions = 0;
  readonly maxEntries: number;
  protected readonly index = new Map<K, Node<K, V>>();
  protected readonly onEvict: ((key: K, value: V) => void) | undefined;

  constructor(options: BoundedCacheOptions<K, V>) {
    this.maxEntries = options.maxEntries;
    this.onEvict = options.onEvict;
  }

  get size(): number {
    return this.index.size;
  }

  abstract get(key: K): V | undefined;
  abstract set(key: K, value: V): void;
  protected abstract listOf(node: Node<K, V>): List<K, V>;
  protected abstract clearLists(): void;

  peek(key: K): V | undefined {
    return this.index.get(key)?.value;
  }

  delete(key: K): boolean {
    const node = this.index.get(key);
    if (node === undefined) return false;
    this.index.delete(key);
    this.listOf(node).unlink(node);
    return true;
  }

  clear(): void {
    this.index.clear();
    this.clearLists();
  }

  *entries(): IterableIterator<[K, V]> {
    for (const [key, node] of this.index) yield [key, node.value];
  }

  /** Removes `node` for good (it is already out of its list) and tells the hook. */
  protected evict(node: Node<K, V>): void {
    this.index.delete(node.key);
    this.evictions++;
    this.onEvict?.(node.key, node.value);
  }
}

class LruCache<K, V> extends Base<K, V> {
  private readonly list = new List<K, V>();

  get(key: K): V | undefined {
    const node = this.index.get(key);
    if (node === undefined) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    if (node !== this.list.tail) {
      this.list.unlink(node);
      this.list.push(node);
    }
    return node.value;
  }

  set(key: K, value: V): void {
    const found = this.index.get(key);
    if (found !== undefined) {
      found.value = value;
      this.list.unlink(found);
      this.list.push(found);
      return;
    }
    if (this.index.size >= this.maxEntries) this.evict(this.list.shift()!);
    const node: Node<K, V> = {
      key,
      value,
      freq: 0,
      main: false,
      prev: undefined,
      next: undefined,
    };
    this.index.set(key, node);
    this.list.push(node);
  }

  protected listOf(): List<K, V> {
    return this.list;
  }

  protected clearLists(): void {
    this.list.clear();
  }
}

/** The share of entries the small queue holds. */
const SMALL_SHARE = 0.1;
/** The highest frequency an entry keeps (2 bits). */
const MAX_FREQ = 3;

/**
 * A 32-bit fingerprint of a key for the ghost queue (FNV-1a over the UTF-16 units of its text):
 * a collision only lets a key skip the small queue, never serves a value.
 */
function fingerprint(key: unknown): number {
  const text = typeof key === "string" ? key : String(key);
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  }
  return hash | 0;
}

class S3FifoCache<K, V> extends Base<K, V> {
  private readonly small = new List<K, V>();
  private readonly main = new List<K, V>();
  /**
   * The ghost queue: fingerprints of keys evicted from the small queue in a ring (oldest at
   * `ghostNext` once full), and each fingerprint's latest slot. A ring rather than a Map's
   * insertion order: V8 finds a Map's first entry by skipping the deleted ones before it, which
   * made evicting the oldest fingerprint cost more the longer the churn went on.
   */
  private readonly ghostRing: Int32Array;
  private readonly ghostSlot = new Map<number, number>();
  private ghostNext = 0;
  private ghostFull = false;
  private readonly smallMax: number;

  constructor(options: BoundedCacheOptions<K, V>) {
    super(options);
    this.smallMax = Math.max(1, Math.floor(options.maxEntries * SMALL_SHARE));
    this.ghostRing = new Int32Array(Math.max(1, options.maxEntries - this.smallMax));
  }

  get(key: K): V | undefined {
    const node = this.index.get(key);
    if (node === undefined) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    if (node.freq < MAX_FREQ) node.freq++;
    return node.value;
  }

  set(key: K, value: V): void {
    const found = this.index.get(key);
    if (found !== undefined) {
      found.value = value;
      return;
    }
    // The ghost is asked first: the eviction below may forget the oldest fingerprint.
    const seen = this.ghostSlot.delete(fingerprint(key));
    while (this.index.size >= this.maxEntries) this.evictOne();
    const node: Node<K, V> = {
      key,
      value,
      freq: 0,
      main: seen,
      prev: undefined,
      next: undefined,
    };
    this.index.set(key, node);
    (node.main ? this.main : this.small).push(node);
  }

  protected listOf(node: Node<K, V>): List<K, V> {
    return node.main ? this.main : this.small;
  }

  protected clearLists(): void {
    this.small.clear();
    this.main.clear();
    this.ghostSlot.clear();
    this.ghostNext = 0;
    this.ghostFull = false;
  }

  /** Evicts one entry: from the small queue while it is over its share, else from main. */
  private evictOne(): void {
    if (this.small.length >= this.smallMax || this.main.length === 0) {
      // Entries read again while in the small queue move to main; the first that was not goes.
      for (let node = this.small.shift(); node !== undefined; node = this.small.shift()) {
        if (node.freq > 0) {
          node.freq = 0;
          node.main = true;
          this.main.push(node);
          continue;
        }
        this.remember(node.key);
        this.evict(node);
        return;
      }
    }
    // Main: an entry read since it was last here goes round again with one read less.
    for (let node = this.main.shift(); node !== undefined; node = this.main.shift()) {
      if (node.freq > 0) {
        node.freq--;
        this.main.push(node);
        continue;
      }
      this.evict(node);
      return;
    }
  }

  /** Puts `key`'s fingerprint in the ghost queue, forgetting the oldest when it is full. */
  private remember(key: K): void {
    const slot = this.ghostNext;
    if (this.ghostFull) {
      const oldest = this.ghostRing[slot];
      if (this.ghostSlot.get(oldest) === slot) this.ghostSlot.delete(oldest);
    }
    const print = fingerprint(key);
    this.ghostRing[slot] = print;
    this.ghostSlot.set(print, slot);
    this.ghostNext = slot + 1 === this.ghostRing.length ? 0 : slot + 1;
    if (this.ghostNext === 0) this.ghostFull = true;
  }
}
