/**
 * One request worker of the pool (src/server/worker_pool.ts): spawning it in
 * its slot, routing its messages to whoever waits for them, and restarting it
 * when it dies — after a delay that doubles while it keeps dying quickly.
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import type { PasswordHasher } from "../passwords/passwords.ts";
import { type Logger, toErrorText } from "../platform/logger.ts";
import type { MetricsSnapshot } from "../platform/metrics.ts";
import type { Bound } from "./listener.ts";
import type { SharedGrantCounter } from "./open_server_store.ts";
import type { FromWorker, ToWorker } from "./request_worker.ts";
import { servePasswordRequests } from "./remote_hasher.ts";

/** The first restart waits this long; each quick death doubles it, up to {@link MAX_RESTART_DELAY_MS}. */
export const RESTART_DELAY_MS = 100;
export const MAX_RESTART_DELAY_MS = 5000;
/** A worker that served this long before dying restarts after {@link RESTART_DELAY_MS} again. */
const STABLE_AFTER_MS = 30_000;

/** One worker and the answers it owes. */
export interface Slot {
  index: number;
  worker: Worker;
  startedAt: number;
  listening: boolean;
  delayMs: number;
  metrics: Map<number, (snapshot: MetricsSnapshot | undefined) => void>;
  tlsDone: Map<number, (error: string | undefined) => void>;
  drained?: (finished: boolean) => void;
}

/** What every worker of one pool is started with, and the pool's state they update. */
export interface PoolState {
  readonly url: URL;
  readonly config: Config;
  readonly hasher: PasswordHasher;
  readonly logger: Logger;
  readonly sharedGrantCounter?: SharedGrantCounter;
  /** Hears a worker's store condition that needs a restart of the process (fatal_stop.ts). */
  readonly onFatal?: (reason: string) => void;
  readonly slots: Slot[];
  /** The port every worker serves (the first worker's, once it listens). */
  port: number;
  /** The certificate pair a worker started now gets (the latest reload's). */
  tls?: { cert: string; key: string };
  /** Set once the pool stops: a dying worker is then not restarted. */
  draining: boolean;
  /** Workers restarted after dying. */
  restarts: number;
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

/**
 * Starts a worker in slot `index`; resolves once it listens, rejects if it cannot start. A worker
 * that dies after listening is restarted (unless the pool drains), `delayMs` later if it died soon.
 */
export function spawnWorker(pool: PoolState, index: number, delayMs: number): Promise<Bound> {
  const worker = new Worker(pool.url, { type: "module", name: `request worker ${index}` });
  const slot: Slot = {
    index,
    worker,
    startedAt: Date.now(),
    listening: false,
    delayMs,
    metrics: new Map(),
    tlsDone: new Map(),
  };
  pool.slots[index] = slot;
  const passwords = servePasswordRequests(pool.hasher, worker);
  return new Promise<Bound>((resolve, reject) => {
    const died = (reason: string) => {
      if (pool.slots[index] !== slot) return; // already replaced
      passwords.abandon();
      abandonSlot(slot);
      if (!slot.listening) return reject(new Error(reason));
      if (!pool.draining) restartAfterDeath(pool, slot, reason);
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
        case "fatal":
          // Not this worker's alone: the database needs a restart of the whole process.
          return pool.onFatal?.(message.reason);
        case "metrics":
        case "drained":
        case "tls-done":
          return answerWaiter(slot, message);
        default:
          return passwords.receive(message);
      }
    };
    const { config, tls, port, sharedGrantCounter } = pool;
    worker.postMessage({ kind: "start", config, tls, port, sharedGrantCounter } satisfies ToWorker);
  });
}

/** An answer to a question of the pool's (src/server/worker_pool.ts). */
type Answer = Extract<FromWorker, { kind: "metrics" | "drained" | "tls-done" }>;

/** Hands an answer to whoever waits for it. */
function answerWaiter(slot: Slot, message: Answer): void {
  switch (message.kind) {
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
  }
}

/** A dead worker answers nothing more: every waiter gets its "no answer" now. */
function abandonSlot(slot: Slot): void {
  for (const answer of slot.metrics.values()) answer(undefined);
  for (const answer of slot.tlsDone.values()) answer(`request worker ${slot.index} died`);
  slot.drained?.(false);
  slot.worker.terminate();
}

function restartAfterDeath(pool: PoolState, slot: Slot, reason: string): void {
  const quick = Date.now() - slot.startedAt < STABLE_AFTER_MS;
  const wait = quick ? slot.delayMs : RESTART_DELAY_MS;
  pool.logger.error(`request worker ${slot.index} died: restarting it`, {
    worker: slot.index,
    reason,
    restart_in_ms: wait,
  });
  restartWorker(pool, slot.index, wait);
}

/** Starts a new worker in slot `index` after `wait` ms; retries, waiting longer, until it listens. */
function restartWorker(pool: PoolState, index: number, wait: number): void {
  setTimeout(() => {
    if (pool.draining) return;
    const next = Math.min(MAX_RESTART_DELAY_MS, wait * 2);
    spawnWorker(pool, index, next).then(
      () => {
        pool.restarts++;
        pool.logger.info(`request worker ${index} restarted`, { worker: index });
      },
      (error) => {
        pool.logger.error(`request worker ${index} could not restart: trying again`, {
          worker: index,
          reason: toErrorText(error),
          restart_in_ms: next,
        });
        restartWorker(pool, index, next);
      },
    );
  }, wait);
}
