/**
 * Stops a listening socket from accepting, without touching the connections
 * it accepted: the step `Deno.serve` (Deno 2.9) lacks for a certificate swap.
 *
 * `server.shutdown()` closes the listener and, at once, every idle keep-alive
 * connection; a client that has just sent its next request on one sees the
 * connection close instead of an answer (measured: about one failed request
 * per connection per swap under `wrk`). So a swap binds the new listener
 * beside the old (`reusePort`), then calls `shutdown(fd, SHUT_RD)` on the old
 * listening socket: Linux takes it out of the port's group at once (new
 * connections reach only the new listener), while the connections it accepted
 * go on being served; the old server answers their next request with
 * `Connection: close` and is shut down later (src/server/swappable_server.ts).
 *
 * Needs FFI (`--allow-ffi`) and glibc on Linux, like src/platform/nodelay.ts;
 * elsewhere {@link stopAccepting} does nothing and returns 0.
 *
 * @module
 */
import { openLibc } from "./libc.ts";
import { listTcpSockets } from "./nodelay.ts";

const SHUT_RD = 0;
const IPPROTO_TCP = 6;
const TCP_INFO = 11;
/** In `struct tcp_info`, `tcpi_unacked`: on a listening socket, its accept queue's length. */
const TCPI_UNACKED_OFFSET = 24;
/** How long {@link stopAccepting} waits for a listener's accept queue to empty. */
const QUEUE_WAIT_MS = 50;

/** This process's listening sockets on `port` (descriptor numbers); empty where it cannot tell. */
export function findListeningSockets(port: number): number[] {
  return listTcpSockets(port).filter((socket) => socket.listening).map((socket) => socket.fd);
}

/**
 * Makes the listening sockets `fds` on `port` stop accepting (see the module); a descriptor
 * that is no longer one of them is left alone. Resolves to how many stopped.
 */
export async function stopAccepting(port: number, fds: number[]): Promise<number> {
  const still = new Set(findListeningSockets(port));
  fds = fds.filter((fd) => still.has(fd));
  if (fds.length === 0) return 0;
  const library = openLibc({
    shutdown: { parameters: ["i32", "i32"], result: "i32" },
    getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  });
  if (library === undefined) return 0;
  const { shutdown, getsockopt } = library.symbols;
  const info = new Uint8Array(256);
  const length = new Uint32Array(1);
  /** Connections the kernel accepted that the server has not taken yet (0 if unknown). */
  const queued = (fd: number) => {
    length[0] = info.length;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, length) !== 0) return 0;
    return new DataView(info.buffer).getUint32(TCPI_UNACKED_OFFSET, true);
  };
  try {
    let stopped = 0;
    for (const fd of fds) {
      // Linux resets what is still queued on a listener that stops (unless
      // net.ipv4.tcp_migrate_req is on): wait, briefly, for the server to take it; no await
      // between the last look and the shutdown.
      const deadline = performance.now() + QUEUE_WAIT_MS;
      while (queued(fd) > 0 && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      if (shutdown(fd, SHUT_RD) === 0) stopped++;
    }
    return stopped;
  } finally {
    library.close();
  }
}
