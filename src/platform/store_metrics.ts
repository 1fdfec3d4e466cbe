/**
 * Metrics of a networked store (PostgreSQL): connections in use, query latency, how stale the
 * grant epoch is, notifications received, polls of the change record and the rows they read, and
 * how long another instance's change took to be learned here. The store reports each query
 * through {@link StoreMetrics.observeOperation} (given to it when it opens, before the metrics
 * exist) and its counters through the `readStats` function attached later.
 *
 * @module
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** What the store reports at scrape time. */
export interface StoreStats {
  /** Reads and writes under way (each holds at most one pooled connection). */
  operationsInFlight: number;
  maxConnections: number;
  /** Milliseconds since the grant epoch was last confirmed. */
  lagMs: number;
  /** Notifications received so far. */
  notifications: number;
  /** Successful polls of the change record so far, and the rows they read. */
  polls: number;
  rowsRead: number;
  /** Whether the revocation listener is connected. */
  listening: boolean;
}

/** Seconds; a query on a local network takes well under a millisecond to tens of them. */
const QUERY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Seconds; a notified change should arrive within milliseconds, a polled one within ~0.5 s. */
export const CHANGE_DELAY_BUCKETS = [
  0.0005,
  0.001,
  0.002,
  0.005,
  0.01,
  0.02,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
];

export interface StoreMetrics {
  /**
   * For the store's `onOperation` option: `refused` is a write the store refused by design (a
   * conflict, a blocked login), not a failure of the database.
   */
  observeOperation(
    kind: "read" | "write",
    seconds: number,
    outcome: "ok" | "refused" | "error",
  ): void;
  /**
   * For the store's `onChangeDelay` option: milliseconds from another instance's commit of a
   * grant-ending change (the database's clock) to this instance having learned it.
   */
  observeChangeDelay(ms: number): void;
  /** For `createMetrics({ register })`. */
  register(registry: Registry): void;
  /** Where the gauges read from at scrape time. */
  attach(readStats: () => StoreStats): void;
}

export function createStoreMetrics(): StoreMetrics {
  let readStats: (() => StoreStats) | undefined;
  let latency: Histogram<"kind" | "outcome"> | undefined;
  let changeDelay: Histogram | undefined;
  let notificationsSeen = 0;
  const seen = { polls: 0, rowsRead: 0 };
  return {
    observeOperation(kind, seconds, outcome) {
      latency?.observe({ kind, outcome }, seconds);
    },
    observeChangeDelay(ms) {
      changeDelay?.observe(ms / 1000);
    },
    attach(read) {
      readStats = read;
    },
    register(registry) {
      const registers = [registry];
      latency = new Histogram({
        name: "keygate_store_query_duration_seconds",
        help: "Database reads and writes (each one query or one transaction), by kind and outcome",
        labelNames: ["kind", "outcome"] as const,
        buckets: QUERY_BUCKETS,
        registers,
      });
      changeDelay = new Histogram({
        name: "keygate_store_change_delay_seconds",
        help: "Another instance's grant-ending commit (the database's clock) to this instance " +
          "having learned it, for notified changes",
        buckets: CHANGE_DELAY_BUCKETS,
        registers,
      });
      new Gauge({
        name: "keygate_store_connections_in_use",
        help: "Pooled database connections busy with a read or write",
        registers,
        collect() {
          if (readStats !== undefined) this.set(readStats().operationsInFlight);
        },
      });
      new Gauge({
        name: "keygate_store_connections_max",
        help: "Size of the database connection pool",
        registers,
        collect() {
          if (readStats !== undefined) this.set(readStats().maxConnections);
        },
      });
      new Gauge({
        name: "keygate_store_grant_epoch_lag_seconds",
        help: "Time since this instance last confirmed it has seen every revocation",
        registers,
        collect() {
          if (readStats !== undefined) this.set(readStats().lagMs / 1000);
        },
      });
      new Gauge({
        name: "keygate_store_listener_up",
        help: "1 while the revocation listener is connected, else 0 (the poll still runs)",
        registers,
        collect() {
          if (readStats !== undefined) this.set(readStats().listening ? 1 : 0);
        },
      });
      new Counter({
        name: "keygate_store_notifications_total",
        help: "Revocation notifications received from the database",
        registers,
        collect() {
          if (readStats === undefined) return;
          const total = readStats().notifications;
          if (total > notificationsSeen) this.inc(total - notificationsSeen);
          notificationsSeen = total;
        },
      });
      for (
        const [field, name, help] of [
          [
            "polls",
            "keygate_store_change_polls_total",
            "Reads of the grant change record (periodic, notified or after a reconnect)",
          ],
          [
            "rowsRead",
            "keygate_store_change_rows_total",
            "Rows of the grant change record those reads returned (one per scope to evict)",
          ],
        ] as const
      ) {
        new Counter({
          name,
          help,
          registers,
          collect() {
            if (readStats === undefined) return;
            const total = readStats()[field];
            if (total > seen[field]) this.inc(total - seen[field]);
            seen[field] = total;
          },
        });
      }
    },
  };
}
