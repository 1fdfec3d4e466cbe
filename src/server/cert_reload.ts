/**
 * Certificate reload without a restart: on SIGHUP, and when `--cert` or
 * `--key` changes (read every `--cert-reload-interval`), the new pair is
 * checked (src/platform/tls_pair.ts) and every HTTPS listener — the API's
 * (on the main thread or in every request worker) and the admin one — swaps
 * to it (src/server/swappable_server.ts). A pair that fails a check is
 * refused with one log line and the serving pair stays; the same refused
 * files are not logged again at every interval, only once changed.
 *
 * With keygate's self-signed pair (no `--cert`) there is nothing to reload:
 * SIGHUP logs one line saying so and changes nothing.
 *
 * Reloads run one at a time; a SIGHUP during one starts one more after it.
 *
 * @module
 */
import type { Logger } from "../platform/logger.ts";
import { findListeningSockets, stopAccepting } from "../platform/listen_sockets.ts";
import type { ReloadOutcome, TlsMetrics } from "../platform/tls_metrics.ts";
import { checkTlsPair, type TlsPair } from "../platform/tls_pair.ts";
import { canBindBeside, type SwappableServer } from "./swappable_server.ts";

type Pem = { cert: string; key: string };

/** One HTTPS listener (or N workers' on one port) whose certificate can change. */
export interface ReloadTarget {
  /** As the expiry metric and the logs name it: `api`, `admin`. */
  name: string;
  port(): number;
  /** Binds listeners with `tls` beside the serving ones. */
  bind(tls: Pem): Promise<void>;
  /** Retires the listeners {@link bind} replaced. */
  retire(stoppedAccepting: boolean): Promise<void>;
}

/** A {@link ReloadTarget} over one listener of this thread. */
export function toReloadTarget(name: string, server: SwappableServer): ReloadTarget {
  return {
    name,
    port: () => server.port,
    bind: (tls) => Promise.resolve(server.bind(tls)),
    retire: (stoppedAccepting) => Promise.resolve(server.retire(stoppedAccepting)),
  };
}

/** Options for {@link startCertReload}. */
export interface CertReloadOptions {
  /** `--cert` and `--key`; undefined with the self-signed pair (nothing to reload). */
  files?: { certFile: string; keyFile: string };
  /** The pair the targets serve now. */
  serving: Pem;
  targets: ReloadTarget[];
  /** Seconds between reads of the files; 0: only on SIGHUP. */
  intervalSeconds: number;
  logger: Logger;
  metrics: TlsMetrics;
}

/** The running reloader; disposing it stops it ({@link CertReloader.stop}, then `close`). */
export interface CertReloader extends AsyncDisposable {
  /** Reloads now (what SIGHUP and the interval call); resolves to the outcome. */
  reload(trigger: "sighup" | "file"): Promise<ReloadOutcome | undefined>;
  /**
   * Stops reading the files and reloading (a SIGHUP from now on is ignored rather than ending
   * the process while it drains); waits for a running reload.
   */
  stop(): Promise<void>;
  /**
   * Stops listening for SIGHUP (after {@link stop}); the server's own SIGHUP listener
   * (src/server/process.ts) keeps a later one from ending the process while it shuts down.
   */
  close(): void;
}

/** Starts listening for SIGHUP and, if set, reading the files every interval. */
export function startCertReload(options: CertReloadOptions): CertReloader {
  const { files, targets, logger, metrics } = options;
  const state: ReloadState = { serving: options.serving, servingExpiry: expiryOf(options.serving) };
  for (const target of targets) {
    if (state.servingExpiry) metrics.setExpiry(target.name, state.servingExpiry);
  }
  let running: Promise<unknown> = Promise.resolve();
  let queued: Promise<ReloadOutcome | undefined> | undefined;

  function reload(trigger: "sighup" | "file"): Promise<ReloadOutcome | undefined> {
    // One at a time; while one waits to start, another request joins it.
    if (queued !== undefined) return queued;
    const next = running.then(() => {
      queued = undefined;
      return attempt(options, state, trigger);
    });
    queued = next;
    running = next.catch((error) =>
      logger.error("certificate reload failed", { error: String(error) })
    );
    return next;
  }

  let stopped = false;
  const onSighup = () => {
    if (!stopped) void reload("sighup");
  };
  let listening = false;
  try {
    Deno.addSignalListener("SIGHUP", onSighup);
    listening = true;
  } catch {
    // No SIGHUP on this system (Windows): the interval alone reloads.
  }
  const timer = files !== undefined && options.intervalSeconds > 0
    ? setInterval(() => void reload("file"), options.intervalSeconds * 1000)
    : undefined;

  function close() {
    if (listening) Deno.removeSignalListener("SIGHUP", onSighup);
    listening = false;
  }

  async function stop() {
    stopped = true;
    clearInterval(timer);
    await running;
  }

  return {
    reload,
    stop,
    close,
    async [Symbol.asyncDispose]() {
      await stop();
      close();
    },
  };
}

/** What a reloader remembers between attempts. */
interface ReloadState {
  /** The pair the targets serve now, and its expiry. */
  serving: Pem;
  servingExpiry?: Date;
  /** The files last refused, so that the interval does not log them again. */
  refused?: string;
}

/** One reload: read the files, check the pair, swap every target; the outcome or undefined. */
async function attempt(
  options: CertReloadOptions,
  state: ReloadState,
  trigger: "sighup" | "file",
): Promise<ReloadOutcome | undefined> {
  const { files, targets, logger, metrics } = options;
  if (files === undefined || targets.length === 0) {
    logger.info(
      "SIGHUP: nothing to reload (no --cert and --key: the self-signed certificate stays)",
    );
    return undefined;
  }
  const fields = { trigger, cert: files.certFile, key: files.keyFile };
  let read: Pem | string;
  try {
    read = {
      cert: await Deno.readTextFile(files.certFile),
      key: await Deno.readTextFile(files.keyFile),
    };
  } catch (error) {
    read = `${error instanceof Deno.errors.NotFound ? "a file is missing" : String(error)}`;
  }
  const seen = typeof read === "string" ? read : `${read.cert}\0${read.key}`;
  if (
    typeof read !== "string" && read.cert === state.serving.cert && read.key === state.serving.key
  ) {
    if (trigger === "file") return undefined;
    logger.info("certificate unchanged: --cert and --key hold the serving pair", fields);
    metrics.countReload("unchanged");
    return "unchanged";
  }
  if (trigger === "file" && seen === state.refused) return undefined;
  let pair: TlsPair;
  try {
    if (typeof read === "string") throw new Error(`--cert or --key cannot be read: ${read}`);
    pair = checkTlsPair(read.cert, read.key, files);
    if (!canBindBeside()) {
      throw new Error("a live listener can change its certificate only with --unstable-net");
    }
  } catch (error) {
    state.refused = seen;
    logger.warn(
      `certificate reload refused: ${(error as Error).message}; still serving the old pair`,
      { ...fields, serving_expires: state.servingExpiry?.toISOString() },
    );
    metrics.countReload("refused");
    return "refused";
  }
  const failures: string[] = [];
  for (const target of targets) {
    const error = await swap(target, pair);
    if (error === undefined) metrics.setExpiry(target.name, pair.notAfter);
    else failures.push(`${target.name} listener: ${error}`);
  }
  state.refused = undefined;
  if (failures.length > 0) {
    logger.error(`certificate reload failed: ${failures.join("; ")}`, fields);
    metrics.countReload("failed");
    return "failed";
  }
  state.serving = pair;
  state.servingExpiry = pair.notAfter;
  logger.info("certificate reloaded", {
    ...fields,
    subject: pair.subject,
    expires: pair.notAfter.toISOString(),
    sha256: pair.fingerprint,
    listeners: targets.map((target) => target.name).join(","),
  });
  metrics.countReload("reloaded");
  return "reloaded";
}

/**
 * Moves one target to `pair`: new listeners first, then the old socket stops accepting, then
 * the old server retires. Returns why it could not, or undefined.
 */
async function swap(target: ReloadTarget, pair: Pem): Promise<string | undefined> {
  const port = target.port();
  const old = findListeningSockets(port);
  try {
    await target.bind({ cert: pair.cert, key: pair.key });
  } catch (error) {
    // Whatever bound retires the old at once; whatever did not keeps serving the old pair.
    await target.retire(false).catch(() => {});
    return (error as Error).message;
  }
  const stopped = await stopAccepting(port, old);
  await target.retire(old.length > 0 && stopped === old.length);
  return undefined;
}

function expiryOf(pem: Pem): Date | undefined {
  try {
    return checkTlsPair(pem.cert, pem.key).notAfter;
  } catch {
    return undefined;
  }
}
