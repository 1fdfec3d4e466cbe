/**
 * What the server holds as a process: its `--pid-file` and its stop signals.
 * Both are taken first and given back last (main.ts registers them before
 * anything else on its one `AsyncDisposableStack`), so that the pid file
 * names a live server until everything has closed, and a second SIGTERM
 * during the final key-usage flush or the store's checkpoint is heard (and
 * ignored) instead of ending the process with the flush half done.
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import { removePidFile, writePidFile } from "../config/preflight.ts";
import type { Logger } from "../platform/logger.ts";

/** Writes `--pid-file`; disposing removes it (if it still holds this process's id). */
export function holdPidFile(path: string): Disposable {
  writePidFile(path);
  return { [Symbol.dispose]: () => removePidFile(path) };
}

/** SIGINT and SIGTERM, heard from {@link listenForStop} until it is disposed. */
export interface StopSignal extends Disposable {
  /** Resolves at the first SIGINT or SIGTERM (later ones change nothing). */
  readonly requested: Promise<void>;
}

/**
 * Listens for SIGINT and SIGTERM: the first logs that the server is shutting down and resolves
 * {@link StopSignal.requested}; later ones are ignored until the listeners are removed. SIGHUP
 * is held too: certificate reloads listen for it while they run (src/server/cert_reload.ts),
 * and one arriving after they stopped must not end the process during its shutdown.
 */
export function listenForStop(logger: Logger, config: Pick<Config, "shutdownTimeoutSeconds">) {
  let signalled!: () => void;
  const requested = new Promise<void>((resolve) => signalled = resolve);
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    logger.info("shutting down: finishing in-flight requests", {
      deadline_seconds: config.shutdownTimeoutSeconds,
    });
    signalled();
  };
  const ignore = () => {};
  const added: [Deno.Signal, () => void][] = [];
  for (
    const [signal, listener] of [["SIGINT", stop], ["SIGTERM", stop], ["SIGHUP", ignore]] as const
  ) {
    try {
      Deno.addSignalListener(signal, listener);
      added.push([signal, listener]);
    } catch (error) {
      // No SIGHUP on Windows; SIGINT and SIGTERM exist everywhere Deno runs.
      if (signal !== "SIGHUP") {
        for (const [signal, listener] of added) Deno.removeSignalListener(signal, listener);
        throw error;
      }
    }
  }
  return {
    requested,
    [Symbol.dispose]() {
      for (const [signal, listener] of added.splice(0)) Deno.removeSignalListener(signal, listener);
    },
  } satisfies StopSignal;
}
