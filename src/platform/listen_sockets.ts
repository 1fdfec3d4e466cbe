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

/** This process's listening sockets on `port` (descriptor numbers); empty where it cannot tell. */
export function findListeningSockets(port: number): number[] {
  return listTcpSockets(port).filter((socket) => socket.listening).map((socket) => socket.fd);
}

/**
 * Makes the listening sockets `fds` on `port` stop accepting (see the module); a descriptor
 * that is no longer one of them is left alone. Returns how many stopped.
 */
export function stopAccepting(port: number, fds: number[]): number {
  const still = new Set(findListeningSockets(port));
  fds = fds.filter((fd) => still.has(fd));
  if (fds.length === 0) return 0;
  const library = openLibc({ shutdown: { parameters: ["i32", "i32"], result: "i32" } });
  if (library === undefined) return 0;
  try {
    return fds.filter((fd) => library.symbols.shutdown(fd, SHUT_RD) === 0).length;
  } finally {
    library.close();
  }
}
