/**
 * One server per address and port, also with `--workers`.
 *
 * With `--workers N` every request worker binds the port with `SO_REUSEPORT`
 * so that the kernel spreads connections among them. The kernel lets any
 * other socket of the same user that also sets `SO_REUSEPORT` join that
 * group, so a second keygate started on the same port (an old instance left
 * running during a deploy, a second unit) would silently take part of the
 * traffic, even with a different database. Before its workers bind, the
 * server therefore claims the address:
 *
 * 1. **A lock**: an abstract Unix socket named after the address
 *    (`@keygate:HOST:PORT`, Linux). The kernel frees it when the process
 *    ends, however it ends, and its namespace is the network namespace, the
 *    same scope as the port's. Two keygates starting at once: one gets it.
 * 2. **A probe**: an exclusive bind of the address (no `SO_REUSEPORT`),
 *    closed at once. It fails if any process serves the address, keygate or
 *    not, with or without `SO_REUSEPORT`.
 *
 * Either failing is `AddrInUse`, explained like the single-threaded
 * server's bind failure. The lock is held until the server stops; the
 * workers' own sockets then share the port among themselves only.
 *
 * @module
 */

/** A claimed address: the port (the one the kernel picked when 0 was asked for). */
export interface PortClaim extends Disposable {
  port: number;
  /** Frees the lock (the process's end frees it too); what disposing it does. */
  release(): void;
}

/**
 * Claims `hostname:port` for this process (see the module documentation).
 *
 * @throws {Deno.errors.AddrInUse} when another process serves or is claiming it; the probe's
 * other errors (`PermissionDenied` below 1024, `AddrNotAvailable`) pass through.
 */
export function claimPort(hostname: string, port: number): PortClaim {
  let lock: Deno.Listener | undefined;
  if (port !== 0) lock = takeLock(hostname, port);
  let bound: number;
  try {
    const probe = Deno.listen({ hostname, port });
    bound = (probe.addr as Deno.NetAddr).port;
    probe.close();
  } catch (error) {
    lock?.close();
    throw error;
  }
  if (port === 0) lock = takeLock(hostname, bound);
  const release = () => {
    try {
      lock?.close();
    } catch {
      // Already closed.
    }
    lock = undefined;
  };
  return { port: bound, release, [Symbol.dispose]: release };
}

/** The lock's name: one per address and port, in the abstract namespace (leading NUL). */
export function lockName(hostname: string, port: number): string {
  return `\0keygate:${hostname}:${port}`;
}

function takeLock(hostname: string, port: number): Deno.Listener | undefined {
  if (Deno.build.os !== "linux") return undefined; // no abstract sockets: the probe alone
  try {
    return Deno.listen({ transport: "unix", path: lockName(hostname, port) });
  } catch (error) {
    if (error instanceof Deno.errors.AddrInUse) {
      throw new Deno.errors.AddrInUse(
        `another keygate is starting or serving on ${hostname}:${port}`,
      );
    }
    // Unix sockets not permitted here (a narrower --allow-write): the probe alone.
    return undefined;
  }
}
