/**
 * A TCP port for a test or a script to hand a process that cannot listen on port 0 and report
 * it (a server's metrics or admin listener, a reverse proxy, an SMTP stand-in, PostgreSQL).
 *
 * @module
 */

/**
 * A port on 127.0.0.1 that was free a moment ago: another process may take it before the caller
 * binds it, so a caller that must not fail on that retries with another.
 */
export function findFreePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}
