/**
 * Turns Nagle's algorithm off on keygate's listening socket.
 *
 * `Deno.serve` (Deno 2.9) leaves Nagle's algorithm on for the connections it
 * accepts, and offers no option to turn it off. Over its TLS listener, a
 * response of roughly 500 to 700 bytes leaves in two segments, and the second
 * waits for the client's delayed ACK: about 40 ms per response on a reused
 * connection (measured on a bare `Deno.serve`: about 1,100 instead of 60,000
 * requests/s). Smaller responses hit it now and then, which shows as a 40 ms
 * tail.
 *
 * On Linux, a connection accepted from a listening socket with
 * `TCP_NODELAY` set inherits it. So setting it once on the listener, right
 * after `Deno.serve` binds, covers every connection, at no cost per request.
 * This needs FFI (`--allow-ffi`) and glibc; elsewhere nothing changes.
 *
 * @module
 */
import { openLibc } from "./libc.ts";

const SOL_SOCKET = 1;
const SO_ACCEPTCONN = 30;
const IPPROTO_TCP = 6;
const TCP_NODELAY = 1;
const AF_INET = 2;
const AF_INET6 = 10;
/** Descriptors looked at: the listener is opened at start-up, long before this many. */
const MAX_FD = 4096;

const LIBC_SYMBOLS = {
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  getsockname: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
} as const;

type Libc = Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"];

/** A TCP socket of this process. */
export interface TcpSocket {
  fd: number;
  /** A listening socket, rather than a connection. */
  listening: boolean;
  /** Whether `TCP_NODELAY` is set (Nagle's algorithm off). */
  noDelay: boolean;
}

function withLibc<T>(fallback: T, use: (libc: Libc) => T): T {
  const library = openLibc(LIBC_SYMBOLS);
  if (library === undefined) return fallback;
  try {
    return use(library.symbols);
  } finally {
    library.close();
  }
}

function readOption(libc: Libc, fd: number, level: number, name: number): number | undefined {
  const value = new Int32Array(1);
  const length = new Uint32Array([4]);
  return libc.getsockopt(fd, level, name, value, length) === 0 ? value[0] : undefined;
}

function findTcpSockets(libc: Libc, port: number): TcpSocket[] {
  const address = new Uint8Array(128); // sockaddr_storage
  const length = new Uint32Array(1);
  const sockets: TcpSocket[] = [];
  // Every descriptor number up to MAX_FD: reading /proc/self/fd would need --allow-all.
  for (let fd = 0; fd < MAX_FD; fd++) {
    length[0] = address.length;
    if (libc.getsockname(fd, address, length) !== 0) continue; // not a socket
    const family = new Uint16Array(address.buffer, 0, 1)[0];
    const boundPort = (address[2] << 8) | address[3]; // network byte order
    if ((family !== AF_INET && family !== AF_INET6) || boundPort !== port) continue;
    const noDelay = readOption(libc, fd, IPPROTO_TCP, TCP_NODELAY);
    if (noDelay === undefined) continue; // not TCP
    const listening = readOption(libc, fd, SOL_SOCKET, SO_ACCEPTCONN) === 1;
    sockets.push({ fd, listening, noDelay: noDelay !== 0 });
  }
  return sockets;
}

/**
 * This process's TCP sockets bound locally to `port`: its listeners and the
 * connections they accepted. Empty where it cannot tell (see the module).
 */
export function listTcpSockets(port: number): TcpSocket[] {
  return withLibc([], (libc) => findTcpSockets(libc, port));
}

/**
 * Sets `TCP_NODELAY` on this process's listening TCP sockets bound to
 * `port`, so that the connections they accept start with it. Returns how
 * many listeners it set (0 where it cannot: see the module).
 */
export function setListenerNoDelay(port: number): number {
  return withLibc(0, (libc) => {
    const on = new Uint8Array(new Int32Array([1]).buffer);
    let set = 0;
    for (const socket of findTcpSockets(libc, port)) {
      if (!socket.listening) continue;
      if (libc.setsockopt(socket.fd, IPPROTO_TCP, TCP_NODELAY, on, 4) === 0) set++;
    }
    return set;
  });
}
