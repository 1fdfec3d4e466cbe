/**
 * When the grant change record is polled (grant_epoch.ts describes the protocol): every `pollMs`,
 * at once when asked (a reconnect, a tool's refresh), and soon after a notification.
 *
 * A notification polls at once, unless a poll ended less than {@link NOTIFIED_POLL_GAP_MS} ago or
 * is under way: then one poll follows, that long after the last one ended, shared by every
 * notification meanwhile. So a quiet instance's delay is one notification and one query, and a
 * burst (1,000 revocations a second through another instance) costs at most one poll per gap,
 * each reading every change since the last, instead of one poll (a query through the driver,
 * about 100 µs of CPU) per change. A notification never waits longer than the gap plus the poll
 * under way, whoever sent it.
 *
 * @module
 */

/** Least time between the end of a poll and a poll a notification asked for, in ms. */
export const NOTIFIED_POLL_GAP_MS = 3;

/** A poll loop (see the module doc). */
export interface PollLoop {
  /** Polls now (or once more after a poll under way); resolves when that poll ended. */
  pollNow(): Promise<void>;
  /** Polls soon (a notification): at once, or one gap after the last poll ended. */
  pollSoon(): void;
  /** Starts the periodic poll. */
  schedule(): void;
  /** Stops, and waits for the polls under way. */
  close(): Promise<void>;
}

/** Runs `poll` as the module doc says: one at a time. */
export function createPollLoop(
  poll: () => Promise<void>,
  options: { pollMs: number; now: () => number; gapMs?: number },
): PollLoop {
  const { pollMs, now } = options;
  const gapMs = options.gapMs ?? NOTIFIED_POLL_GAP_MS;
  let polling: Promise<void> | undefined;
  /** The poll that follows the one under way (asked for after it started). */
  let queued: Promise<void> | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** A notified poll waiting for its gap, and the timer that ends the wait. */
  let soon: Promise<void> | undefined;
  let soonTimer: ReturnType<typeof setTimeout> | undefined;
  let endedAt = -Infinity;
  let closed = false;

  function pollNow(): Promise<void> {
    if (polling !== undefined) {
      // The poll under way may have read before the change that asks: one more after it,
      // shared by everyone who asks meanwhile (a flood of notifications costs one poll).
      queued ??= polling.then(() => {
        queued = undefined;
        return closed ? undefined : pollNow();
      });
      return queued;
    }
    polling = poll().finally(() => {
      polling = undefined;
      endedAt = now();
    });
    return polling;
  }

  function pollSoon(): void {
    if (closed || soon !== undefined) return; // the poll waiting will read this change too
    if (polling === undefined && queued === undefined && now() - endedAt >= gapMs) {
      void pollNow();
      return;
    }
    soon = (async () => {
      // The poll under way (and one queued) may have read before the change that asks.
      while (polling !== undefined || queued !== undefined) await (queued ?? polling);
      const wait = endedAt + gapMs - now();
      if (wait > 0 && !closed) {
        await new Promise<void>((resolve) => {
          soonTimer = setTimeout(resolve, wait);
          Deno.unrefTimer(soonTimer);
        });
      }
      soon = undefined;
      if (!closed) await pollNow();
    })();
  }

  function schedule(): void {
    if (closed) return;
    timer = setTimeout(async () => {
      await pollNow();
      schedule();
    }, pollMs);
    Deno.unrefTimer(timer);
  }

  return {
    pollNow,
    pollSoon,
    schedule,
    async close() {
      closed = true;
      clearTimeout(timer);
      clearTimeout(soonTimer);
      await polling;
      await queued;
    },
  };
}
