/**
 * A request worker (`--workers N`): a Web Worker that serves the public port
 * beside the others (`reusePort`), with its own database connection, grant
 * cache, key-usage recorder and metrics, and the main thread's password pool
 * (src/server/remote_hasher.ts). The main thread starts, supervises and
 * drains it through the messages below (src/server/worker_pool.ts).
 *
 * Revocation stays exact across workers: each worker's grant cache watches
 * the database's change feed, which moves with every commit by any
 * connection, so a revocation through one worker (or the admin CLI) is seen
 * by every worker before its next request.
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import { createLogger } from "../platform/logger.ts";
import { createMetrics, type MetricsSnapshot } from "../platform/metrics.ts";
import { startListener } from "./listener.ts";
import { openServerStore, type SharedGrantCounter } from "./open_server_store.ts";
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
  let running: ReturnType<typeof startListener> | undefined;
  let stop: ((deadlineMs: number) => Promise<void>) | undefined;
  /** The store's invalidation counts, once it is open. */
  let readInvalidations: (() => GrantInvalidations) | undefined;
  const metrics = createMetrics({ readGrantInvalidations: () => readInvalidations?.() });

  async function start(message: Extract<ToWorker, { kind: "start" }>) {
    const { config } = message;
    // Every worker writes to the one standard output: whole lines, one PIPE_BUF at most per write.
    const logger = createLogger({ level: config.logLevel, atomicWriteBytes: 4096 });
    let store;
    let stage: "store" | "listen" = "store";
    try {
      store = await openServerStore(config, {
        // A revocation through any worker (or the main thread) drops every worker's cache at once.
        sharedGrantCounter: message.sharedGrantCounter,
        // On PostgreSQL each worker listens for revocations on a connection of its own.
        onListenerChange: (listening) =>
          logger[listening ? "info" : "warn"](
            listening
              ? "request worker listening for revocations"
              : "request worker's revocation listener lost: polling until it is back",
            { event: "store_listener" },
          ),
      });
      const opened = store;
      readInvalidations = () => opened.readGrantInvalidations();
      stage = "listen";
      running = startListener({
        config,
        tls: message.tls,
        store,
        hasher,
        logger,
        metrics,
        port: message.port,
        reusePort: true,
        announce: false,
      });
    } catch (error) {
      await store?.closeStore();
      scope.postMessage({
        kind: "start-failed",
        message: String((error as Error)?.message ?? error),
        name: String((error as Error)?.name ?? "Error"),
        stage,
      });
      return;
    }
    const { server, keyUsage } = running;
    const openedStore = store;
    stop = async (deadlineMs) => {
      void server.shutdown();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finished = await Promise.race([
        server.finished.then(() => true),
        new Promise<false>((resolve) => timer = setTimeout(() => resolve(false), deadlineMs)),
      ]);
      clearTimeout(timer);
      await keyUsage.stop(); // writes the last uses before the connection closes
      hasher.close();
      await openedStore.closeStore();
      logger.flush();
      scope.postMessage({ kind: "drained", finished });
      scope.close();
    };
    scope.postMessage({ kind: "listening", ...await running.listening });
  }

  function swapTls(message: Extract<ToWorker, { kind: "tls-bind" | "tls-retire" }>) {
    if (running === undefined) return "the worker is not serving";
    try {
      if (message.kind === "tls-bind") running.server.bind(message.tls);
      else running.server.retire(message.stoppedAccepting);
    } catch (error) {
      return String((error as Error)?.message ?? error);
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
