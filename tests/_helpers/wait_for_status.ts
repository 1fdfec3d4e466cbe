/**
 * Polls a request until it answers the status wanted, for the tests that wait for a change
 * to reach another instance or process.
 *
 * @module
 */

/** Sends `request()` until `done(status)`, at most `withinMs`; resolves to the time it took. */
export async function waitForStatus(
  what: string,
  request: () => Promise<Response>,
  status: number,
  withinMs: number,
): Promise<number> {
  const start = performance.now();
  for (;;) {
    const response = await request();
    await response.body?.cancel();
    if (response.status === status) return performance.now() - start;
    if (performance.now() - start > withinMs) {
      throw new Error(`Not ${what} (${status}) within ${withinMs} ms: last ${response.status}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
