/**
 * Last use of each API key (time, client address, count), accumulated in
 * memory on the hot path and written to the store in batches: a periodic
 * flush and a final flush on shutdown, each one transaction. A request never
 * writes to the database because a key was used.
 *
 * @module
 */
import type { Clock } from "./clock.ts";
import type { Logger } from "./logger.ts";
import type { KeyUsage, Store } from "./store.ts";

/** How often the server writes accumulated key uses to the database. */
export const KEY_USAGE_FLUSH_INTERVAL_MS = 15_000;

/** Dependencies of {@link createKeyUsageRecorder}. */
export interface KeyUsageRecorderDeps {
  store: Pick<Store, "recordKeyUsage"> & Partial<Pick<Store, "withoutBusyWait">>;
  clock: Clock;
  logger: Logger;
  /** Default {@link KEY_USAGE_FLUSH_INTERVAL_MS}. */
  intervalMs?: number;
}

/** Accumulates key uses and writes them in batches. */
export interface KeyUsageRecorder {
  /**
   * Notes one successful use of a key at `at` (default: the clock's now); in
   * memory only, with no allocation once the key is pending.
   */
  record(apiKeyId: number, clientAddress: string, at?: number): void;
  /** Writes what has accumulated in one transaction; returns how many keys. Throws on failure, keeping the uses for the next flush. */
  flush(): number;
  /** Number of keys with uses not yet written. */
  pending(): number;
  /** Starts the periodic flush (the timer does not keep the process alive). */
  start(): void;
  /** Stops the periodic flush and flushes once more; never throws. */
  stop(): void;
}

/** Creates a recorder; nothing runs until {@link KeyUsageRecorder.start}. */
export function createKeyUsageRecorder(deps: KeyUsageRecorderDeps): KeyUsageRecorder {
  const { store, clock, logger } = deps;
  const intervalMs = deps.intervalMs ?? KEY_USAGE_FLUSH_INTERVAL_MS;
  let pending = new Map<number, KeyUsage>();
  let timer: ReturnType<typeof setInterval> | undefined;

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

  function flush(wait = true): number {
    if (pending.size === 0) return 0;
    const batch = [...pending.values()];
    pending = new Map();
    try {
      // From the timer, never wait for another process's lock: SQLite's busy wait would
      // freeze every request; the uses are kept and written at the next flush instead.
      if (wait || !store.withoutBusyWait) store.recordKeyUsage(batch);
      else store.withoutBusyWait(() => store.recordKeyUsage(batch));
    } catch (error) {
      // Keep the uses (merged with any that arrived meanwhile) for the next flush.
      for (const usage of batch) merge(usage);
      throw error;
    }
    return batch.length;
  }

  function flushLogged(wait = true): void {
    try {
      flush(wait);
    } catch (error) {
      logger.error("key usage flush failed; will retry", {
        error: String(error),
        pending_keys: pending.size,
      });
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
    pending: () => pending.size,
    start() {
      if (timer !== undefined) return;
      const id = setInterval(() => flushLogged(false), intervalMs);
      Deno.unrefTimer(id);
      timer = id;
    },
    stop() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      flushLogged();
    },
  };
}
