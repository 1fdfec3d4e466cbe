/**
 * Prometheus metrics, on prom-client with a registry of its own per
 * {@link createMetrics} call (no global state), and the handler of the
 * separate metrics listener.
 *
 * Labels take values from small fixed sets (route patterns, error codes),
 * never raw paths or anything a caller chooses freely.
 *
 * @module
 */
import {
  AggregatorRegistry,
  Counter,
  Gauge,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from "prom-client";
import { type CacheName, registerCacheMetrics, type WatchedCache } from "./cache_metrics.ts";
import { createLatencyHistogram } from "./latency_histogram.ts";

/** One registry's metrics as data, to be summed with others' (another worker's). */
export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

export type { Registry };

/** Why a secure request was let through (`ok`) or refused. */
export type SecureOutcome = "allowed" | "denied";

/** Options for {@link createMetrics}. */
export interface MetricsOptions {
  /** Counts live tokens at scrape time; throws to report a database error. */
  countLiveTokens?: () => Promise<number>;
  /**
   * The snapshots of other metric sets (the request workers', one each) that
   * {@link Metrics.render} sums with this one's: counters and histograms add
   * up, so one scrape answers for every worker.
   */
  gatherOthers?: () => Promise<MetricsSnapshot[]>;
  /** Registers more metrics in this set's registry (the PostgreSQL store's, store_metrics.ts). */
  register?: (registry: Registry) => void;
  /** The password pool's admission state, read at scrape time (the main thread's set only). */
  readPasswordQueue?: () => { out: number; hashMs: number };
  /**
   * Grant changes this process's store has learned and applied to its caches so far, by scope
   * (`Store.readGrantInvalidations`), read at scrape time; `undefined` before the store opened.
   */
  readGrantInvalidations?: () => Record<GrantScopeLabel, number> | undefined;
  /**
   * The portal's outbox, counted at scrape time (`Store.countMail`; with `--portal on`): messages
   * queued, sent and given up. Throws to report a database error.
   */
  countMail?: () => Promise<Record<MailState, number>>;
}

/** Where an outbox message stands: waiting to be sent (or retried), sent, or given up. */
export type MailState = "queued" | "sent" | "given_up";

const MAIL_STATES: readonly MailState[] = ["queued", "sent", "given_up"];

/** The scopes of grant invalidations: one token, one API key, one user, or everything. */
export type GrantScopeLabel = "token" | "key" | "user" | "all";

const GRANT_SCOPES: readonly GrantScopeLabel[] = ["token", "key", "user", "all"];

/** Seconds; from a fast secure request (sub-millisecond) to a queued password check. */
const LATENCY_BUCKETS = [
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
];

/** Totals of the counters since the process started, summed over their labels. */
export interface CounterTotals {
  tokensIssued: number;
  loginFailures: number;
  throttled: number;
  secureAllowed: number;
  secureDenied: number;
}

/** The counters, histograms and gauges keygate exposes. */
export interface Metrics {
  /** A token was issued. */
  tokenIssued(): void;
  /** A token request failed; `reason` is an error code (`invalid_credentials`, …). */
  loginFailed(reason: string): void;
  /**
   * A request was refused by throttling, by route pattern. The handler calls
   * it for every 429 response; throttling code need not.
   */
  throttled(route: string): void;
  /** A secure request was authenticated (`ok`) or refused (`invalid_token`, `token_expired`, …). */
  secureRequest(outcome: SecureOutcome, reason: string): void;
  /** A request finished; `route` is a route pattern, never a raw path. */
  observeRequest(labels: { route: string; method: string; status: number }, seconds: number): void;
  /** A request was refused by a limit of its key or user (429), by kind (`rate`, `quota`). */
  limitedRequest(kind: "rate" | "quota"): void;
  /**
   * The store could not be reached for a lease: a `rate` admitted uncounted, a `quota` refused
   * (503).
   */
  limitStoreUnavailable(kind: "rate" | "quota"): void;
  /** A limiter's store call leased for `keys` keys at once. */
  limitLeases(keys: number): void;
  /** A request waited for a lease of its key's limits (no units in hand). */
  limitLeaseWait(): void;
  /** A database operation failed (`request`, `readiness`, `janitor`, `live_tokens`). */
  databaseError(source: string): void;
  /** Token rows deleted by the janitor. */
  tokensPurged(count: number): void;
  /** Reports a cache's counters (hits, misses, evictions, entries) at every scrape from now on. */
  watchCache(name: CacheName, cache: WatchedCache): void;
  /** The running totals of the counters above, for the admin console's charts. */
  readCounters(): Promise<CounterTotals>;
  /** The registry (summed with {@link MetricsOptions.gatherOthers}) in Prometheus text format. */
  render(): Promise<string>;
  /** This set's own metrics as data, for another thread to sum. */
  readSnapshot(): Promise<MetricsSnapshot>;
  readonly contentType: string;
}

/** Creates a metrics set with its own registry. */
export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  // Registered first, so it renders first, as before.
  const { countLiveTokens, readPasswordQueue, readGrantInvalidations } = options;
  const liveTokens = countLiveTokens === undefined ? undefined : new Gauge({
    name: "keygate_live_tokens",
    help: "Tokens neither expired nor revoked, counted at scrape time",
    registers,
  });
  if (readPasswordQueue !== undefined) registerPasswordQueue(registers, readPasswordQueue);
  if (readGrantInvalidations !== undefined) {
    registerGrantInvalidations(registers, readGrantInvalidations);
  }
  const mailOutbox = options.countMail === undefined ? undefined : new Gauge({
    name: "keygate_mail_outbox_messages",
    help: "The portal's outbox by state (queued, sent, given_up), counted at scrape time",
    labelNames: ["state"] as const,
    registers,
  });
  const counters = registerRequestMetrics(registry);
  const limits = registerLimitMetrics(registers);
  const watchCache = registerCacheMetrics(registers);
  options.register?.(registry);
  // Known label values start at zero, so rates work from the first scrape.
  for (const reason of ["ok", "invalid_token", "token_expired"]) {
    counters.secure.counter.labels({ outcome: reason === "ok" ? "allowed" : "denied", reason });
  }
  counters.loginFailures.labels({ reason: "invalid_credentials" });
  counters.databaseErrors.labels({ source: "request" });

  /** Counts live tokens before a scrape renders, so that a failure is counted in that scrape. */
  async function countTokensNow(): Promise<void> {
    if (liveTokens === undefined || countLiveTokens === undefined) return;
    try {
      liveTokens.set(await countLiveTokens());
    } catch {
      counters.databaseErrors.inc({ source: "live_tokens" });
      liveTokens.set(Number.NaN);
    }
  }
  /** Counts the outbox before a scrape renders; a failure is counted, the gauge NaN. */
  async function countMailNow(): Promise<void> {
    if (mailOutbox === undefined || options.countMail === undefined) return;
    try {
      const counts = await options.countMail();
      for (const state of MAIL_STATES) mailOutbox.set({ state }, counts[state]);
    } catch {
      counters.databaseErrors.inc({ source: "mail_outbox" });
      for (const state of MAIL_STATES) mailOutbox.set({ state }, Number.NaN);
    }
  }
  const readOwn = async () => await registry.getMetricsAsJSON() as MetricsSnapshot;

  return {
    tokenIssued: () => counters.issued.inc(),
    loginFailed: (reason) => counters.loginFailures.inc({ reason }),
    throttled: (route) => counters.throttled.inc({ route }),
    secureRequest: counters.secure.count,
    observeRequest: ({ route, method, status }, seconds) =>
      counters.latency.observe(route, method, status, seconds),
    limitedRequest: (kind) => limits.limited.inc({ kind }),
    limitStoreUnavailable: (kind) => limits.unavailable.inc({ kind }),
    limitLeases: (keys) => {
      limits.leases.inc();
      limits.leasedKeys.inc(keys);
    },
    limitLeaseWait: () => limits.leaseWaits.inc(),
    databaseError: (source) => counters.databaseErrors.inc({ source }),
    tokensPurged: (count) => counters.purged.inc(count),
    watchCache,
    // Every worker's counters, as /metrics sums them: with --workers N the secure path runs in
    // the workers, so the main thread's own registry alone would show no secure traffic.
    readCounters: async () =>
      toCounterTotals([await readOwn(), ...(await options.gatherOthers?.() ?? [])]),
    render: async () => {
      await countTokensNow();
      await countMailNow();
      if (options.gatherOthers === undefined) return registry.metrics();
      const others = await options.gatherOthers();
      return AggregatorRegistry.aggregate([await readOwn(), ...others]).metrics();
    },
    readSnapshot: readOwn,
    contentType: registry.contentType,
  };
}

/** The password pool's admission state as two gauges read at scrape time. */
function registerPasswordQueue(
  registers: Registry[],
  readPasswordQueue: NonNullable<MetricsOptions["readPasswordQueue"]>,
): void {
  new Gauge({
    name: "keygate_login_queue_jobs",
    help: "Password checks accepted and not yet answered (computing, or waiting for a worker)",
    registers,
    collect() {
      this.set(readPasswordQueue().out);
    },
  });
  new Gauge({
    name: "keygate_password_hash_seconds",
    help: "Moving average of one password hash's time: the login queue's wait estimate",
    registers,
    collect() {
      this.set(readPasswordQueue().hashMs / 1000);
    },
  });
}

/** The store's grant invalidations by scope, as a counter that follows the store's totals. */
function registerGrantInvalidations(
  registers: Registry[],
  readInvalidations: NonNullable<MetricsOptions["readGrantInvalidations"]>,
): void {
  const counted: Record<GrantScopeLabel, number> = { token: 0, key: 0, user: 0, all: 0 };
  const invalidations: Counter<"scope"> = new Counter({
    name: "keygate_grant_invalidations_total",
    help: "Grant-ending changes applied to the caches, by scope (token, key, user, or all: " +
      "everything emptied)",
    labelNames: ["scope"] as const,
    registers,
    collect() {
      const totals = readInvalidations();
      for (const scope of GRANT_SCOPES) {
        const total = totals?.[scope] ?? counted[scope];
        if (total > counted[scope]) invalidations.inc({ scope }, total - counted[scope]);
        counted[scope] = total;
      }
    },
  });
  for (const scope of GRANT_SCOPES) invalidations.inc({ scope }, 0);
}

/** The counters and the histogram the request path and the janitor update. */
function registerRequestMetrics(registry: Registry) {
  const registers = [registry];
  const issued = new Counter({
    name: "keygate_tokens_issued_total",
    help: "Access tokens issued",
    registers,
  });
  const loginFailures = new Counter({
    name: "keygate_login_failures_total",
    help: "Failed token requests, by error code",
    labelNames: ["reason"] as const,
    registers,
  });
  const throttled = new Counter({
    name: "keygate_throttled_requests_total",
    help: "Requests refused by throttling (429), by route pattern",
    labelNames: ["route"] as const,
    registers,
  });
  const secure = registerSecureCounter(registers);
  const latency = createLatencyHistogram(registry, {
    name: "keygate_http_request_duration_seconds",
    help: "Time from request to response, by route pattern, method and status",
    buckets: LATENCY_BUCKETS,
  });
  const databaseErrors = new Counter({
    name: "keygate_database_errors_total",
    help: "Failed database operations, by where they happened",
    labelNames: ["source"] as const,
    registers,
  });
  const purged = new Counter({
    name: "keygate_tokens_purged_total",
    help: "Expired and revoked token rows deleted by the janitor",
    registers,
  });
  return { issued, loginFailures, throttled, secure, latency, databaseErrors, purged };
}

/**
 * Requests refused by a rate or a quota, and leases the store could not answer, by kind; the
 * leases themselves and the requests that waited for one.
 */
function registerLimitMetrics(registers: Registry[]) {
  const limited = new Counter({
    name: "keygate_limited_requests_total",
    help: "Requests refused (429) by a rate or a quota of their API key or user, by kind",
    labelNames: ["kind"] as const,
    registers,
  });
  const unavailable = new Counter({
    name: "keygate_limit_store_unavailable_total",
    help: "Leases the store could not answer: rates admit uncounted, quotas refuse, by kind",
    labelNames: ["kind"] as const,
    registers,
  });
  const leases = new Counter({
    name: "keygate_limit_leases_total",
    help: "Store calls that leased units of limits (one transaction each, for one or more keys)",
    registers,
  });
  const leasedKeys = new Counter({
    name: "keygate_limit_leased_keys_total",
    help: "Keys whose limits were leased (a store call leases for many keys at once)",
    registers,
  });
  const leaseWaits = new Counter({
    name: "keygate_limit_lease_waits_total",
    help: "Requests that waited for a lease of their key's limits (no units in hand)",
    registers,
  });
  // Both kinds start at zero, so rates work from the first scrape.
  for (const kind of ["rate", "quota"]) {
    limited.inc({ kind }, 0);
    unavailable.inc({ kind }, 0);
  }
  return { limited, unavailable, leases, leasedKeys, leaseWaits };
}

/**
 * Secure requests by outcome and reason: counted in plain maps on every secure request
 * (prom-client's inc() converts and hashes its labels each time), and handed over to the
 * counter whenever it is read.
 */
function registerSecureCounter(registers: Registry[]) {
  /** Secure requests counted since the last read, added to the counter when it is read. */
  const pending = new Map<SecureOutcome, Map<string, number>>();
  const counter: Counter<"outcome" | "reason"> = new Counter({
    name: "keygate_secure_requests_total",
    help: "Secure requests allowed or denied, by reason",
    labelNames: ["outcome", "reason"] as const,
    registers,
    collect() {
      for (const [outcome, byReason] of pending) {
        for (const [reason, count] of byReason) counter.inc({ outcome, reason }, count);
      }
      pending.clear();
    },
  });
  function count(outcome: SecureOutcome, reason: string): void {
    let byReason = pending.get(outcome);
    if (byReason === undefined) pending.set(outcome, byReason = new Map());
    byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
  }
  return { counter, count };
}

/** The counters' totals over every snapshot (this set's and the workers'). */
function toCounterTotals(snapshots: MetricsSnapshot[]): CounterTotals {
  const total = (name: string, outcome?: SecureOutcome) =>
    snapshots.flat().filter((metric) => metric.name === name)
      .flatMap((metric) => metric.values)
      .filter((value) => outcome === undefined || value.labels.outcome === outcome)
      .reduce((sum, { value }) => sum + value, 0);
  return {
    tokensIssued: total("keygate_tokens_issued_total"),
    loginFailures: total("keygate_login_failures_total"),
    throttled: total("keygate_throttled_requests_total"),
    secureAllowed: total("keygate_secure_requests_total", "allowed"),
    secureDenied: total("keygate_secure_requests_total", "denied"),
  };
}
