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
import type { FromWorker, ToWorker } from "./request_worker.ts";
import { servePasswordRequests } from "./remote_hasher.ts";

/** How long a scrape waits for a worker's metrics before leaving it out. */
export const METRICS_TIMEOUT_MS = 2000;
/** The first restart waits this long; each quick death doubles it, up to {@link MAX_RESTART_DELAY_MS}. */
export const RESTART_DELAY_MS = 100;
export const MAX_RESTART_DELAY_MS = 5000;
/** A worker that served this long before dying restarts after {@link RESTART_DELAY_MS} again. */
const STABLE_AFTER_MS = 30_000;

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

interface Slot {
  index: number;
  worker: Worker;
  startedAt: number;
  listening: boolean;
  delayMs: number;
  metrics: Map<number, (snapshot: MetricsSnapshot | undefined) => void>;
  tlsDone: Map<number, (error: string | undefined) => void>;
  drained?: (finished: boolean) => void;
}

/**
 * A request worker could not start: its error's message and class, and whether opening the store
 * or binding the port failed.
 */
export class WorkerStartError extends Error {
  override name = "WorkerStartError";
  constructor(
    message: string,
    /** The worker's error class, such as `AddrInUse`. */
    readonly errorName: string,
    readonly stage: "store" | "listen",
  ) {
    super(message);
  }

  /** The worker's error as the main thread would have had it: a `Deno.errors` class if one. */
  toOriginal(): Error {
    const Class = (Deno.errors as unknown as Record<string, ErrorConstructor | undefined>)[
      this.errorName
    ];
    return Class === undefined ? new Error(this.message) : new Class(this.message);
  }
}

/** Creates the pool; nothing runs until {@link WorkerPool.start}. */
export function createWorkerPool(options: WorkerPoolOptions): WorkerPool {
  const { config, logger } = options;
  const url = options.workerUrl ?? new URL("./request_worker.ts", import.meta.url);
  const slots: Slot[] = [];
  let port = options.port ?? config.port;
  let draining = false;
  let restarts = 0;
  let nextMetricsId = 1;
  let tls = options.tls;

  function spawn(index: number, delayMs: number): Promise<Bound> {
    const worker = new Worker(url, { type: "module", name: `request worker ${index}` });
    const slot: Slot = {
      index,
      worker,
      startedAt: Date.now(),
      listening: false,
      delayMs,
      metrics: new Map(),
      tlsDone: new Map(),
    };
    slots[index] = slot;
    const passwords = servePasswordRequests(options.hasher, worker);
    return new Promise<Bound>((resolve, reject) => {
      const died = (reason: string) => {
        if (slots[index] !== slot) return; // already replaced
        passwords.abandon();
        for (const answer of slot.metrics.values()) answer(undefined);
        for (const answer of slot.tlsDone.values()) answer(`request worker ${index} died`);
        slot.drained?.(false);
        worker.terminate();
        if (!slot.listening) {
          reject(new Error(reason));
          return;
        }
        if (draining) return;
        const quick = Date.now() - slot.startedAt < STABLE_AFTER_MS;
        const wait = quick ? slot.delayMs : RESTART_DELAY_MS;
        logger.error(`request worker ${index} died: restarting it`, {
          worker: index,
          reason,
          restart_in_ms: wait,
        });
        restart(index, wait);
      };
      worker.onerror = (event) => {
        event.preventDefault(); // a worker's death must not end the process
        died(event.message ?? "uncaught error");
      };
      worker.onmessageerror = () => died("unreadable message");
      worker.onmessage = (event: MessageEvent<FromWorker>) => {
        const message = event.data;
        switch (message.kind) {
          case "listening":
            slot.listening = true;
            return resolve({ port: message.port, noDelay: message.noDelay });
          case "start-failed":
            worker.terminate();
            return reject(new WorkerStartError(message.message, message.name, message.stage));
          case "metrics": {
            const answer = slot.metrics.get(message.id);
            slot.metrics.delete(message.id);
            return answer?.(message.snapshot);
          }
          case "drained":
            return slot.drained?.(message.finished);
          case "tls-done": {
            const answer = slot.tlsDone.get(message.id);
            slot.tlsDone.delete(message.id);
            return answer?.(message.error);
          }
          default:
            return passwords.receive(message);
        }
      };
      worker.postMessage(
        {
          kind: "start",
          config,
          tls,
          port,
          sharedGrantCounter: options.sharedGrantCounter,
        } satisfies ToWorker,
      );
    });
  }

  /** Starts a new worker in slot `index` after `wait` ms; retries, waiting longer, until it listens. */
  function restart(index: number, wait: number) {
    setTimeout(() => {
      if (draining) return;
      const next = Math.min(MAX_RESTART_DELAY_MS, wait * 2);
      spawn(index, next).then(
        () => {
          restarts++;
          logger.info(`request worker ${index} restarted`, { worker: index });
        },
        (error) => {
          logger.error(`request worker ${index} could not restart: trying again`, {
            worker: index,
            reason: String(error?.message ?? error),
            restart_in_ms: next,
          });
          restart(index, next);
        },
      );
    }, wait);
  }

  function send(slot: Slot, message: ToWorker) {
    slot.worker.postMessage(message);
  }

  /** Sends a tls-bind or tls-retire to every listening worker; rejects with the first error. */
  async function swapTls(message: (id: number) => ToWorker): Promise<void> {
    const errors = await Promise.all(
      slots.map((slot) =>
        new Promise<string | undefined>((resolve) => {
          if (!slot.listening) return resolve(undefined);
          const id = nextMetricsId++;
          const timer = setTimeout(() => {
            slot.tlsDone.delete(id);
            resolve(`request worker ${slot.index} did not answer`);
          }, METRICS_TIMEOUT_MS);
          slot.tlsDone.set(id, (error) => {
            clearTimeout(timer);
            resolve(error);
          });
          send(slot, message(id));
        })
      ),
    );
    const error = errors.find((error) => error !== undefined);
    if (error !== undefined) throw new Error(error);
  }

  return {
    async start() {
      // The first worker binds (port 0 picks one); the others then share the port it got.
      const first = await spawn(0, RESTART_DELAY_MS);
      port = first.port;
      try {
        await Promise.all(
          Array.from({ length: config.workers - 1 }, (_, i) => spawn(i + 1, RESTART_DELAY_MS)),
        );
      } catch (error) {
        draining = true;
        for (const slot of slots) slot?.worker.terminate();
        throw error;
      }
      return first;
    },
    async gatherMetrics() {
      const answers = await Promise.all(
        slots.map((slot) =>
          new Promise<MetricsSnapshot | undefined>((resolve) => {
            if (!slot.listening) return resolve(undefined);
            const id = nextMetricsId++;
            const timer = setTimeout(() => {
              slot.metrics.delete(id);
              resolve(undefined);
            }, METRICS_TIMEOUT_MS);
            slot.metrics.set(id, (snapshot) => {
              clearTimeout(timer);
              resolve(snapshot);
            });
            send(slot, { kind: "metrics", id });
          })
        ),
      );
      return answers.filter((snapshot) => snapshot !== undefined);
    },
    yieldCpu(ms) {
      for (const slot of slots) if (slot.listening) send(slot, { kind: "yield", ms });
    },
    async drain(deadlineMs) {
      draining = true;
      const results = await Promise.all(slots.map((slot) =>
        new Promise<boolean>((resolve) => {
          if (!slot.listening) return resolve(true);
          // The worker has the deadline; a hung one gets a second more, then is terminated.
          const timer = setTimeout(() => resolve(false), deadlineMs + 1000);
          slot.drained = (finished) => {
            clearTimeout(timer);
            resolve(finished);
          };
          send(slot, { kind: "drain", deadlineMs });
        })
      ));
      for (const slot of slots) slot.worker.terminate();
      return results.every(Boolean);
    },
    async bindTls(next) {
      tls = next;
      await swapTls((id) => ({ kind: "tls-bind", id, tls: next }));
    },
    retireTls: (stoppedAccepting) =>
      swapTls((id) => ({ kind: "tls-retire", id, stoppedAccepting })),
    get restarts() {
      return restarts;
    },
  };
}
