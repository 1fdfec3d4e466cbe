/**
 * A request worker (`--workers N`): a Web Worker that serves the public port
 * beside the others (`reusePort`), with its own database connection, grant
 * cache, key-usage recorder and metrics, and the main thread's password pool
 * (src/server/remote_hasher.ts). The main thread starts, supervises and
 * drains it through the messages below (src/server/worker_pool.ts). It opens
 * its store and starts its listener as the main thread does, through the
 * same functions (the handler's dependencies from src/server/compose.ts), on
 * one `AsyncDisposableStack` that closes them in reverse order.
 *
 * Revocation stays exact across workers: each worker's grant cache watches
 * the database's change feed, which moves with every commit by any
 * connection, so a revocation through one worker (or the admin CLI) is seen
 * by every worker before its next request.
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import { createLogger, toErrorText } from "../platform/logger.ts";
import { createMetrics, type MetricsSnapshot } from "../platform/metrics.ts";
import { type ApiListener, startApiListener } from "./listener.ts";
import { openServingStore, type SharedGrantCounter } from "./open_server_store.ts";
import type { GrantInvalidations } from "../store/store.ts";
import { createRemoteHasher, type PasswordAnswer, type PasswordRequest } from "./remote_hasher.ts";

/** Main thread → worker. */
export type ToWorker =
  | {
    kind: "start";
    config: Config;
    tls?: { cert: string; key: string };
    /** The port to bind: 0 (or the configured one) for the first worker, then the one it got. */
    port: number;
    /** The process's shared grant counter (shared memory: every worker sees every increment). */
    sharedGrantCounter?: SharedGrantCounter;
  }
  | { kind: "metrics"; id: number }
  | { kind: "drain"; deadlineMs: number }
  | { kind: "yield"; ms: number }
  /** A certificate reload: bind a listener with the new pair beside the serving one. */
  | { kind: "tls-bind"; id: number; tls: { cert: string; key: string } }
  /** …then retire the replaced one (src/server/swappable_server.ts). */
  | { kind: "tls-retire"; id: number; stoppedAccepting: boolean }
  | PasswordAnswer;

/** Worker → main thread. */
export type FromWorker =
  | { kind: "listening"; port: number; noDelay: boolean }
  | {
    kind: "start-failed";
    message: string;
    /** The error's class (`AddrInUse`, say), so the main thread explains it as its own. */
    name: string;
    /** Opening the store or binding the port. */
    stage: "store" | "listen";
  }
  | { kind: "metrics"; id: number; snapshot: MetricsSnapshot }
  | { kind: "drained"; finished: boolean }
  /** The store hit a condition that needs a restart (src/server/fatal_stop.ts). */
  | { kind: "fatal"; reason: string }
  /** The answer to a tls-bind or tls-retire; `error` when the new listener could not bind. */
  | { kind: "tls-done"; id: number; error?: string }
  | PasswordRequest;

/** Sleeps this thread, giving the CPU to the password workers (see the pool's starvation valve). */
function sleepThread(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Serves until drained; every message from the main thread goes through here. */
function runWorker(scope: { postMessage(message: FromWorker): void; close(): void }) {
  const hasher = createRemoteHasher(scope);
  // What this worker has started, closed in reverse order when it drains (or fails to start).
  const parts = new AsyncDisposableStack();
  parts.defer(() => hasher.close());
  let running: ApiListener | undefined;
  let stop: ((deadlineMs: number) => Promise<void>) | undefined;
  /** The store's invalidation counts, once it is open. */
  let readInvalidations: (() => GrantInvalidations) | undefined;
  const metrics = createMetrics({ readGrantInvalidations: () => readInvalidations?.() });

  async function start(message: Extract<ToWorker, { kind: "start" }>) {
    const { config } = message;
    // Every worker writes to the one standard output: whole lines, one PIPE_BUF at most per write.
    const logger = createLogger({ level: config.logLevel, atomicWriteBytes: 4096 });
    parts.defer(() => logger.flush());
    let stage: "store" | "listen" = "store";
    try {
      const { store } = parts.use(
        await openServingStore(config, {
          // A revocation through any worker (or the main thread) drops every worker's cache at once.
          sharedGrantCounter: message.sharedGrantCounter,
          // The main thread stops the whole server: every worker writes to the same database.
          onFatal: (reason) => scope.postMessage({ kind: "fatal", reason }),
          // On PostgreSQL each worker listens for revocations on a connection of its own.
          onListenerChange: (listening) =>
            logger[listening ? "info" : "warn"](
              listening
                ? "request worker listening for revocations"
                : "request worker's revocation listener lost: polling until it is back",
              { event: "store_listener" },
            ),
        }, { logger }),
      );
      readInvalidations = () => store.readGrantInvalidations();
      stage = "listen";
      running = parts.use(startApiListener(config, { store, hasher, logger, metrics }, {
        tls: message.tls,
        port: message.port,
        reusePort: true,
        announce: false,
      }));
    } catch (error) {
      await parts.disposeAsync();
      scope.postMessage({
        kind: "start-failed",
        message: toErrorText(error),
        name: String((error as Error)?.name ?? "Error"),
        stage,
      });
      return;
    }
    const api = running;
    stop = async (deadlineMs) => {
      const finished = await api.drain(deadlineMs);
      await parts.disposeAsync(); // the last key uses written, then the store closed
      scope.postMessage({ kind: "drained", finished });
      scope.close();
    };
    scope.postMessage({ kind: "listening", ...await api.listening });
  }

  function swapTls(message: Extract<ToWorker, { kind: "tls-bind" | "tls-retire" }>) {
    if (running === undefined) return "the worker is not serving";
    try {
      if (message.kind === "tls-bind") running.server.bind(message.tls);
      else running.server.retire(message.stoppedAccepting);
    } catch (error) {
      return toErrorText(error);
    }
  }

  return async (message: ToWorker) => {
    switch (message.kind) {
      case "start":
        return await start(message);
      case "metrics":
        return scope.postMessage({
          kind: "metrics",
          id: message.id,
          snapshot: await metrics.readSnapshot(),
        });
      case "drain":
        return await stop?.(message.deadlineMs);
      case "yield":
        return sleepThread(message.ms);
      case "tls-bind":
      case "tls-retire":
        return scope.postMessage({ kind: "tls-done", id: message.id, error: swapTls(message) });
      default:
        return hasher.receive(message);
    }
  };
}

if ("WorkerGlobalScope" in globalThis) {
  const scope = self as unknown as Worker & { close(): void };
  const receive = runWorker(scope);
  scope.onmessage = (event: MessageEvent<ToWorker>) => void receive(event.data);
}
