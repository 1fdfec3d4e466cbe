/**
 * Last use of each API key (time, client address, count), accumulated in
 * memory on the hot path and written to the store in batches: a periodic
 * flush, a few hundred keys per transaction with requests served in between,
 * and a final flush on shutdown. A request never writes to the database
 * because a key was used.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { nextTask } from "../platform/next_task.ts";
import type { KeyUsage, Store } from "../store/store.ts";

/** How often the server writes accumulated key uses to the database. */
export const KEY_USAGE_FLUSH_INTERVAL_MS = 15_000;

/**
 * Keys per transaction in the periodic flush, which yields to requests
 * between transactions: 10,000 keys written at once held the thread for
 * about 30 ms.
 */
export const KEY_USAGE_FLUSH_BATCH = 250;

/** Dependencies of {@link createKeyUsageRecorder}. */
export interface KeyUsageRecorderDeps {
  store: Pick<Store, "recordKeyUsage">;
  clock: Clock;
  logger: Logger;
  /** Default {@link KEY_USAGE_FLUSH_INTERVAL_MS}. */
  intervalMs?: number;
  /** Default {@link KEY_USAGE_FLUSH_BATCH}. */
  batchKeys?: number;
}

/** Accumulates key uses and writes them in batches. */
export interface KeyUsageRecorder {
  /**
   * Notes one successful use of a key at `at` (default: the clock's now); in
   * memory only, with no allocation once the key is pending.
   */
  record(apiKeyId: number, clientAddress: string, at?: number): void;
  /** Writes what has accumulated in one transaction; resolves to how many keys. Rejects on failure, keeping the uses for the next flush. */
  flush(): Promise<number>;
  /**
   * Writes what has accumulated in transactions of at most `batchKeys` keys,
   * letting other tasks run in between (what the timer does). Never throws:
   * a failure is logged and the unwritten uses kept for the next flush.
   */
  flushGradually(): Promise<void>;
  /** Number of keys with uses not yet written. */
  pending(): number;
  /** Starts the periodic flush (the timer does not keep the process alive). */
  start(): void;
  /** Stops the periodic flush and flushes once more; never rejects. */
  stop(): Promise<void>;
}

/** Creates a recorder; nothing runs until {@link KeyUsageRecorder.start}. */
export function createKeyUsageRecorder(deps: KeyUsageRecorderDeps): KeyUsageRecorder {
  const { store, clock, logger } = deps;
  const intervalMs = deps.intervalMs ?? KEY_USAGE_FLUSH_INTERVAL_MS;
  const batchKeys = deps.batchKeys ?? KEY_USAGE_FLUSH_BATCH;
  let pending = new Map<number, KeyUsage>();
  let timer: ReturnType<typeof setInterval> | undefined;
  /** Uses taken by a gradual flush and not yet written; stop() writes them. */
  let unwritten: KeyUsage[] = [];
  let flushing = false;

  function merge(usage: KeyUsage): void {
    const current = pending.get(usage.apiKeyId);
    if (current === undefined) {
      pending.set(usage.apiKeyId, { ...usage });
      return;
    }
    current.count += usage.count;
    if (usage.lastUsedAt >= current.lastUsedAt) {
      current.lastUsedAt = usage.lastUsedAt;
      current.lastUsedFrom = usage.lastUsedFrom;
    }
  }

  async function flush(): Promise<number> {
    if (pending.size === 0) return 0;
    const batch = [...pending.values()];
    pending = new Map();
    try {
      await store.recordKeyUsage(batch);
    } catch (error) {
      // Keep the uses (merged with any that arrived meanwhile) for the next flush.
      for (const usage of batch) merge(usage);
      throw error;
    }
    return batch.length;
  }

  async function flushLogged(): Promise<void> {
    try {
      await flush();
    } catch (error) {
      logFailure(error);
    }
  }

  function logFailure(error: unknown): void {
    logger.error("key usage flush failed; will retry", {
      error: String(error),
      pending_keys: pending.size,
    });
  }

  /** The batch a gradual flush is writing now; stop() waits for it. */
  let writing: Promise<void> | undefined;

  async function flushGradually(): Promise<void> {
    if (flushing || pending.size === 0) return;
    flushing = true;
    unwritten = [...pending.values()];
    pending = new Map();
    try {
      while (unwritten.length > 0) {
        const batch = unwritten.slice(0, batchKeys);
        unwritten = unwritten.slice(batch.length);
        // The store waits for another process's lock between turns of the event loop,
        // so requests are served meanwhile. A failure keeps the uses for the next flush.
        writing = store.recordKeyUsage(batch);
        try {
          await writing;
        } catch (error) {
          for (const usage of batch) merge(usage);
          throw error;
        } finally {
          writing = undefined;
        }
        if (unwritten.length > 0) await nextTask();
      }
    } catch (error) {
      for (const usage of unwritten) merge(usage);
      unwritten = [];
      logFailure(error);
    } finally {
      flushing = false;
    }
  }

  return {
    record(apiKeyId, clientAddress, at = clock.now()) {
      const current = pending.get(apiKeyId);
      if (current === undefined) {
        pending.set(apiKeyId, { apiKeyId, lastUsedAt: at, lastUsedFrom: clientAddress, count: 1 });
        return;
      }
      current.count++;
      if (at >= current.lastUsedAt) {
        current.lastUsedAt = at;
        current.lastUsedFrom = clientAddress;
      }
    },
    flush: () => flush(),
    flushGradually,
    pending: () => pending.size + unwritten.length,
    start() {
      if (timer !== undefined) return;
      const id = setInterval(flushGradually, intervalMs);
      Deno.unrefTimer(id);
      timer = id;
    },
    async stop() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      // A gradual flush in progress stops at its next batch: what it has not written goes now.
      for (const usage of unwritten) merge(usage);
      unwritten = [];
      // The batch it is writing finishes first (a failed one is back in `pending`).
      await writing?.catch(() => {});
      await flushLogged();
    },
  };
}
