/**
 * Yielding to the event loop between batches of long work.
 *
 * @module
 */

/**
 * Resolves after `ms` (default 0), letting other tasks (requests) run first:
 * the pause between batches of a long write, so that none holds the thread.
 */
export function nextTask(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
