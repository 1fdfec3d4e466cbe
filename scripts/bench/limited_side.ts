/**
 * What the in-process limit measures (limiter_cost.ts, serve_cost.ts) share: the default limits
 * they put on a copy of the seeded database, and one side of a comparison: the real handler over
 * one database, with its own limiter.
 *
 * @module
 */
import { createKeyUsageRecorder } from "../../src/auth/key_usage.ts";
import { createLimiter, type Limiter } from "../../src/auth/limiter.ts";
import { createHandler, type Handler } from "../../src/http/app.ts";
import type { PasswordHasher } from "../../src/passwords/passwords.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createMetrics } from "../../src/platform/metrics.ts";
import type { Store } from "../../src/store/store.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";

/**
 * Puts the rate-limits section's default limits on the database at `path`: a rate (per hour, so
 * that no window ends in a run) and a monthly quota, both too high to refuse.
 */
export async function putDefaultLimits(path: string): Promise<void> {
  const store = openSqliteStore(path);
  try {
    const now = Date.now();
    const limit = { scope: "default", subjectId: null } as const;
    await store.putLimit({ ...limit, kind: "rate", max: 1e9, period: "hour" }, {
      now,
      audit: undefined,
    });
    await store.putLimit({ ...limit, kind: "quota", max: 1e12, period: "month" }, {
      now,
      audit: undefined,
    });
  } finally {
    await store.closeStore();
  }
}

/** One side of a comparison: the handler, its store and its limiter (started). */
export interface LimitedSide {
  store: Store;
  limiter: Limiter;
  handle: Handler;
  close(): Promise<void>;
}

/** Opens the database at `path` and builds the real handler over it, with the headers or not. */
export function startLimitedSide(
  path: string,
  hasher: PasswordHasher,
  limitHeaders: boolean,
): LimitedSide {
  const store = openSqliteStore(path);
  const logger = createLogger({ level: "info", write: () => {} });
  const metrics = createMetrics();
  const limiter = createLimiter({ store, clock: systemClock, logger, metrics, leaseAhead: true });
  limiter.start();
  const handle = createHandler({
    store,
    hasher,
    clock: systemClock,
    logger,
    metrics,
    limiter,
    limitHeaders,
    defaultTimeoutSeconds: 36_000,
    keyUsage: createKeyUsageRecorder({ store, clock: systemClock, logger }),
  });
  return {
    store,
    limiter,
    handle,
    async close() {
      await limiter.stop();
      await store.closeStore();
    },
  };
}
