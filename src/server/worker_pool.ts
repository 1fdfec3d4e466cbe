/**
 * The main thread's side of `--workers N`: starts N request workers on one
 * port, restarts (and logs) any that dies, sums their metrics for one
 * `/metrics` answer, runs their password jobs on the one pool, and drains
 * them all on shutdown.
 *
 * Threads rather than processes: the same per-request cost here, less memory,
 * one process to supervise (one pid for systemd and --pid-file, no
 * --allow-run, the same compiled binary), and the password pool and metrics
 * shared by plain messages. See docs/performance.md, "Threads or processes".
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import type { PasswordHasher } from "../passwords/passwords.ts";
import type { Logger } from "../platform/logger.ts";
import type { MetricsSnapshot } from "../platform/metrics.ts";
import type { Bound } from "./listener.ts";
import type { SharedGrantCounter } from "./open_server_store.ts";
import type { ToWorker } from "./request_worker.ts";
import { type PoolState, RESTART_DELAY_MS, type Slot, spawnWorker } from "./worker_spawn.ts";

/** How long a scrape (or a certificate swap) waits for a worker's answer before going on. */
export const METRICS_TIMEOUT_MS = 2000;

/** Options for {@link createWorkerPool}. */
export interface WorkerPoolOptions {
  config: Config;
  tls?: { cert: string; key: string };
  hasher: PasswordHasher;
  logger: Logger;
  /**
   * The grant counter the main thread's store shares with every worker's (see
   * open_server_store.ts): a revocation anywhere in the process drops every worker's cache.
   */
  sharedGrantCounter?: SharedGrantCounter;
  /** Hears a worker's store condition that needs a restart of the process (fatal_stop.ts). */
  onFatal?(reason: string): void;
  /** The port to serve (claimed beforehand, see port_guard.ts). Default: `config.port`. */
  port?: number;
  /** The worker module. Default: src/server/request_worker.ts (tests swap in one that dies). */
  workerUrl?: URL;
}

/** N request workers. */
export interface WorkerPool {
  /** Starts every worker; resolves once all listen on one port, rejects if one cannot. */
  start(): Promise<Bound>;
  /** Each live worker's metrics. */
  gatherMetrics(): Promise<MetricsSnapshot[]>;
  /** Makes every worker sleep `ms`, giving the CPU to the password pool. */
  yieldCpu(ms: number): void;
  /** Stops every listener and waits for in-flight requests; false if the deadline passed first. */
  drain(deadlineMs: number): Promise<boolean>;
  /**
   * A certificate reload, first step: every worker binds a listener with `tls` beside its
   * serving one (workers started later get `tls` too). Rejects with the first worker's error.
   */
  bindTls(tls: { cert: string; key: string }): Promise<void>;
  /** …second step: every worker retires the listener the first step replaced. */
  retireTls(stoppedAccepting: boolean): Promise<void>;
  /** Workers restarted after dying. */
  readonly restarts: number;
}

interface Pool extends PoolState {
  /** The next id of a question to a worker (metrics, TLS swap); answers name it. */
  nextId: number;
}

/** Creates the pool; nothing runs until {@link WorkerPool.start}. */
export function createWorkerPool(options: WorkerPoolOptions): WorkerPool {
  const { config, hasher, logger, sharedGrantCounter } = options;
  const pool: Pool = {
    url: options.workerUrl ?? new URL("./request_worker.ts", import.meta.url),
    config,
    hasher,
    logger,
    sharedGrantCounter,
    onFatal: options.onFatal,
    slots: [],
    port: options.port ?? config.port,
    tls: options.tls,
    draining: false,
    restarts: 0,
    nextId: 1,
  };
  return {
    start: () => startWorkers(pool),
    async gatherMetrics() {
      const answers = await askWorkers(pool, {
        waiters: (slot) => slot.metrics,
        message: (id) => ({ kind: "metrics", id }),
        silence: () => undefined,
      });
      return answers.filter((snapshot) => snapshot !== undefined);
    },
    yieldCpu(ms) {
      for (const slot of pool.slots) {
        if (slot.listening) slot.worker.postMessage({ kind: "yield", ms });
      }
    },
    drain: (deadlineMs) => drainWorkers(pool, deadlineMs),
    async bindTls(next) {
      pool.tls = next;
      await swapTls(pool, (id) => ({ kind: "tls-bind", id, tls: next }));
    },
    retireTls: (stoppedAccepting) =>
      swapTls(pool, (id) => ({ kind: "tls-retire", id, stoppedAccepting })),
    get restarts() {
      return pool.restarts;
    },
  };
}

async function startWorkers(pool: Pool): Promise<Bound> {
  // The first worker binds (port 0 picks one); the others then share the port it got.
  const first = await spawnWorker(pool, 0, RESTART_DELAY_MS);
  pool.port = first.port;
  try {
    await Promise.all(
      Array.from(
        { length: pool.config.workers - 1 },
        (_, i) => spawnWorker(pool, i + 1, RESTART_DELAY_MS),
      ),
    );
  } catch (error) {
    pool.draining = true;
    for (const slot of pool.slots) slot?.worker.terminate();
    throw error;
  }
  return first;
}

async function drainWorkers(pool: Pool, deadlineMs: number): Promise<boolean> {
  pool.draining = true;
  const results = await Promise.all(pool.slots.map((slot) =>
    new Promise<boolean>((resolve) => {
      if (!slot.listening) return resolve(true);
      // The worker has the deadline; a hung one gets a second more, then is terminated.
      const timer = setTimeout(() => resolve(false), deadlineMs + 1000);
      slot.drained = (finished) => {
        clearTimeout(timer);
        resolve(finished);
      };
      slot.worker.postMessage({ kind: "drain", deadlineMs } satisfies ToWorker);
    })
  ));
  for (const slot of pool.slots) slot.worker.terminate();
  return results.every(Boolean);
}

/** Sends a tls-bind or tls-retire to every listening worker; rejects with the first error. */
async function swapTls(pool: Pool, message: (id: number) => ToWorker): Promise<void> {
  const errors = await askWorkers(pool, {
    waiters: (slot) => slot.tlsDone,
    message,
    silence: (slot) => `request worker ${slot.index} did not answer`,
  });
  const error = errors.find((error) => error !== undefined);
  if (error !== undefined) throw new Error(error);
}

/** One question to every worker: where its answer is awaited, and what silence means. */
interface Question<T> {
  waiters(slot: Slot): Map<number, (answer: T | undefined) => void>;
  message(id: number): ToWorker;
  /** The answer of a worker that did not answer within {@link METRICS_TIMEOUT_MS}. */
  silence(slot: Slot): T | undefined;
}

/** Asks every listening worker; one answer per slot (undefined from a worker not listening). */
function askWorkers<T>(pool: Pool, question: Question<T>): Promise<(T | undefined)[]> {
  return Promise.all(
    pool.slots.map((slot) =>
      new Promise<T | undefined>((resolve) => {
        if (!slot.listening) return resolve(undefined);
        const id = pool.nextId++;
        const waiters = question.waiters(slot);
        const timer = setTimeout(() => {
          waiters.delete(id);
          resolve(question.silence(slot));
        }, METRICS_TIMEOUT_MS);
        waiters.set(id, (answer) => {
          clearTimeout(timer);
          resolve(answer);
        });
        slot.worker.postMessage(question.message(id));
      })
    ),
  );
}
