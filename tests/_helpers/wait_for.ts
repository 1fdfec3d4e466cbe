/**
 * Waiting, in a test, until a condition the code under test makes true holds: polled every
 * millisecond, with a deadline so that one that never holds fails the test instead of hanging it.
 *
 * @module
 */

/**
 * Polls `done` every millisecond; resolves to the ms it took.
 * @throws {Error} `Not <what> within <withinMs> ms` when `done` has not held by then.
 */
export async function waitFor(
  what: string,
  done: () => boolean,
  withinMs = 5000,
): Promise<number> {
  const start = performance.now();
  while (!done()) {
    if (performance.now() - start > withinMs) throw new Error(`Not ${what} within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return performance.now() - start;
}
