/**
 * When the grant change record is polled (grant_epoch.ts describes the protocol): every `pollMs`,
 * at once when asked (a reconnect, a tool's refresh), and soon after a notification.
 *
 * A notification polls at once, unless a poll ended less than {@link NOTIFIED_POLL_GAP_MS} ago or
 * is under way: then one poll follows, that long after the last one ended, shared by every
 * notification meanwhile (a flag and one plain timer, no chain of promises to wait on). So a
 * quiet instance's delay is one notification and one query, and a burst (1,000 revocations a
 * second through another instance) costs at most one poll per gap,
 * each reading every change since the last, instead of one poll (a query through the driver,
 * about 100 µs of CPU) per change. A notification never waits longer than the gap plus the poll
 * under way, whoever sent it.
 *
 * @module
 */

/** Least time between the end of a poll and a poll a notification asked for, in ms. */
export const NOTIFIED_POLL_GAP_MS = 3;

/**
 * How long past its time a notified poll's timer may be late before the next notification stops
 * waiting for it and polls at once, in ms. Such a timer has not been seen since the loop stopped
 * awaiting a chain of promises; the bound keeps one lost wake-up from ever turning the notified
 * path into the periodic poll (it once did, for good, after a burst: issue 23).
 */
export const LATE_TIMER_MS = 50;

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

/**
 * The timers a loop uses for both of its polls, the periodic one and a notified one waiting for
 * its gap (the platform's; a test's to hold one back or fire one by hand).
 */
export interface LoopTimers {
  /** Runs `fn` once after `ms`; with `background`, the timer keeps no process alive. */
  set(fn: () => void, ms: number, background?: boolean): ReturnType<typeof setTimeout>;
  clear(id: ReturnType<typeof setTimeout> | undefined): void;
}

const platformTimers: LoopTimers = {
  set(fn, ms, background = false) {
    const id = setTimeout(fn, ms);
    if (background) Deno.unrefTimer(id);
    return id;
  },
  clear: (id) => clearTimeout(id),
};

/** Runs `poll` as the module doc says: one at a time. */
export function createPollLoop(
  poll: () => Promise<void>,
  options: { pollMs: number; now: () => number; gapMs?: number; timers?: LoopTimers },
): PollLoop {
  const { pollMs, now } = options;
  const gapMs = options.gapMs ?? NOTIFIED_POLL_GAP_MS;
  const timers = options.timers ?? platformTimers;
  let polling: Promise<void> | undefined;
  /** The poll that follows the one under way (asked for by pollNow after it started). */
  let queued: Promise<void> | undefined;
  /** The periodic poll's timer. */
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** A notification came while a poll was under way: a notified poll follows it. */
  let again = false;
  /** The timer of a notified poll waiting for its gap, and when it is due. */
  let soonTimer: ReturnType<typeof setTimeout> | undefined;
  let soonDue = 0;
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
    again = false; // this poll reads every change notified so far
    polling = poll().finally(() => {
      polling = undefined;
      endedAt = now();
      // Notified while this poll ran (it may have read before their changes): one more, a gap
      // from now, unless a queued poll starts at once and reads them anyway.
      if (again && queued === undefined) {
        again = false;
        pollSoon();
      }
    });
    return polling;
  }

  function pollSoon(): void {
    if (closed) return;
    if (polling !== undefined || queued !== undefined) {
      again = true; // the poll under way may have read before this change: one follows it
      return;
    }
    if (soonTimer !== undefined) {
      if (now() <= soonDue + LATE_TIMER_MS) return; // the poll waiting will read this change too
      timers.clear(soonTimer); // late beyond reason: never let a notification wait on it
      soonTimer = undefined;
    }
    const wait = endedAt + gapMs - now();
    if (wait <= 0) {
      void pollNow();
      return;
    }
    soonDue = now() + wait;
    soonTimer = timers.set(() => {
      soonTimer = undefined;
      pollSoon();
    }, wait);
  }

  function schedule(): void {
    if (closed) return;
    // In the background: the periodic poll alone keeps no process alive.
    timer = timers.set(
      async () => {
        await pollNow();
        schedule();
      },
      pollMs,
      true,
    );
  }

  return {
    pollNow,
    pollSoon,
    schedule,
    async close() {
      closed = true;
      timers.clear(timer);
      timers.clear(soonTimer);
      await polling;
      await queued;
    },
  };
}
