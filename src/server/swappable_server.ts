/**
 * An HTTPS listener whose certificate can change while it serves.
 *
 * `Deno.serve` (Deno 2.9) takes its certificate once, when it binds: it has no
 * callback or method to change it (denoland/deno#23233 plans one). So a swap
 * starts a second `Deno.serve` with the new pair on the same address
 * (`reusePort`), stops the old listening socket from accepting
 * (src/platform/listen_sockets.ts), and retires the old server: from then on
 * its answers carry `Connection: close`, so each client finishes its request
 * and opens its next connection to the new listener, and after
 * {@link RETIRE_AFTER_MS} the old server is shut down gracefully (a request
 * still running finishes; a connection left idle that long is closed). The
 * request handler, its store and its caches are the same for both.
 *
 * @module
 */

/** How long a retired server keeps its connections before it is shut down. */
export const RETIRE_AFTER_MS = 10_000;

/**
 * Whether a second listener can bind beside a serving one: `reusePort` is unstable in Deno 2.9,
 * there only with `--unstable-net` (which the start task passes and deno.json turns on).
 */
export function canBindBeside(): boolean {
  return "listenDatagram" in Deno;
}

/** Options for {@link startSwappableServer}. */
export interface SwappableServerOptions {
  hostname: string;
  port: number;
  /** Bind with `reusePort`, so that a swap can bind beside the serving listener. */
  reusePort: boolean;
  /**
   * Before the first bind, check that nothing else listens on the address: with `reusePort`,
   * another process of the same user (a second keygate) would otherwise share it silently.
   */
  checkAddressFree?: boolean;
  /** PEM certificate and key; undefined: plain HTTP, which never swaps. */
  tls?: { cert: string; key: string };
  /** Called on every bind with the port it got; `first` is false for a swap's. */
  onListen?(address: Deno.NetAddr, first: boolean): void;
  /** Default {@link RETIRE_AFTER_MS}. */
  retireAfterMs?: number;
}

/** A listener that can change its certificate; `shutdown` and `finished` as on Deno.HttpServer. */
export interface SwappableServer {
  /**
   * Settles once the server stops: after {@link shutdown} when every server (the serving one
   * and the retired ones) has finished, or when the serving one stops by itself.
   */
  readonly finished: Promise<void>;
  /** The bound port (the one port 0 got). */
  readonly port: number;
  /** Stops accepting and finishes in-flight requests, on every server. */
  shutdown(): Promise<void>;
  /**
   * Binds a new server with `tls` beside the serving one, which keeps serving until
   * {@link retire}. Throws when it cannot bind; nothing changes then.
   */
  bind(tls: { cert: string; key: string }): void;
  /**
   * Retires the server the last {@link bind} replaced. `stoppedAccepting`: its listening socket
   * no longer accepts, so it can keep its connections for a while; otherwise it is shut down
   * at once (new connections would still reach it).
   */
  retire(stoppedAccepting: boolean): void;
}

interface Serving {
  server: Deno.HttpServer<Deno.NetAddr>;
  draining: boolean;
  timer?: ReturnType<typeof setTimeout>;
  done: Promise<void>;
}

/** Starts serving `handler` (throws as `Deno.serve` does when it cannot bind). */
export function startSwappableServer(
  options: SwappableServerOptions,
  handler: Deno.ServeHandler<Deno.NetAddr>,
): SwappableServer {
  const retireAfterMs = options.retireAfterMs ?? RETIRE_AFTER_MS;
  let port = options.port;
  let stopping = false;
  let ended!: () => void;
  const stopped = new Promise<void>((resolve) => ended = resolve);
  const retired = new Set<Serving>();
  let previous: Serving | undefined;

  function start(tls: { cert: string; key: string } | undefined, first: boolean): Serving {
    const serving = { draining: false } as Serving;
    const served: Deno.ServeHandler<Deno.NetAddr> = (request, info) => {
      const answer = handler(request, info);
      return serving.draining ? Promise.resolve(answer).then(closeAfter) : answer;
    };
    serving.server = Deno.serve({
      hostname: options.hostname,
      port,
      reusePort: options.reusePort,
      ...(tls === undefined ? {} : { cert: tls.cert, key: tls.key }),
      onListen(address) {
        port = address.port;
        options.onListen?.(address, first);
      },
    }, served);
    // A retired server's accept loop ends with an error once its socket stops accepting.
    serving.done = serving.server.finished.catch(() => {});
    void serving.done.then(() => {
      if (serving === current && !stopping) ended();
    });
    return serving;
  }

  if (options.checkAddressFree && options.reusePort && port !== 0) {
    // Throws AddrInUse as Deno.serve would, for the caller's one-line explanation.
    Deno.listen({ hostname: options.hostname, port }).close();
  }
  let current = start(options.tls, true);

  async function stopAll(): Promise<void> {
    stopping = true;
    const all = [current, ...retired];
    for (const serving of all) {
      clearTimeout(serving.timer);
      void serving.server.shutdown().catch(() => {});
    }
    await Promise.all(all.map((serving) => serving.done));
    ended();
  }

  return {
    finished: stopped,
    get port() {
      return port;
    },
    shutdown: stopAll,
    bind(tls) {
      if (stopping) throw new Error("the server is shutting down");
      const next = start(tls, false);
      if (previous !== undefined) retireNow(previous, false);
      previous = current;
      current = next;
    },
    retire(stoppedAccepting) {
      if (previous === undefined) return;
      retireNow(previous, stoppedAccepting);
      previous = undefined;
    },
  };

  function retireNow(serving: Serving, stoppedAccepting: boolean): void {
    serving.draining = true;
    retired.add(serving);
    const close = () => {
      void serving.server.shutdown().catch(() => {});
      void serving.done.then(() => retired.delete(serving));
    };
    if (stoppedAccepting) serving.timer = setTimeout(close, retireAfterMs);
    else close();
  }
}

/** The response with `Connection: close`, so the client's next request opens a new connection. */
function closeAfter(response: Response): Response {
  try {
    response.headers.set("connection", "close");
    return response;
  } catch {
    // Immutable headers (a response from fetch): a copy with the same body and status.
    const copy = new Response(response.body, response);
    copy.headers.set("connection", "close");
    return copy;
  }
}
