/**
 * How long another instance's change took to reach this one: from its commit (the time the
 * database's clock gave its notification, just before the commit) to this instance having
 * learned it (the poll that read it ended; every lookup after that evicts it before answering).
 * For the `keygate_store_change_delay_seconds` metric only: a notification stays a prompt
 * (grant_epoch.ts), and a spoofed payload can at worst skew this metric, never what is learned.
 *
 * Compares the database's clock with this host's (`Date.now()`): meaningful when they are the
 * same clock (one host) or closely synchronised. A notification that arrives after its position
 * was learned (an earlier poll read it) counts from its arrival: an upper bound.
 *
 * This instance's own commits (and its sibling workers', learned through the process's shared
 * ring) are no other instance's: the watcher tells the tracker to {@link ChangeDelayTracker.forget}
 * them, whether their notification (every listener hears its own) came before or comes after.
 * This instance's own writes also tag their payload with its origin (a random id per store), so
 * that a notification of its own commit counts nothing even when its poll reads the position
 * before the write has resolved (the race `forget` alone left open).
 *
 * @module
 */

/** Notifications waiting for their position to be learned, at most (the oldest are dropped). */
export const PENDING_NOTIFICATIONS = 1024;

/**
 * `<position> <scopes> @<ms since the epoch, database clock> #<writer's origin>`; older payloads
 * have no time, or no origin.
 */
const PAYLOAD = /^(\d{1,16}) [^@]*@(\d{1,16}(?:\.\d{1,6})?)(?: #([A-Za-z0-9]{1,32}))?$/;

export interface ChangeDelayTracker {
  /** A notification's payload arrived; `learnedUpTo` is the position learned so far. */
  notified(payload: string, learnedUpTo: number | undefined): void;
  /** Every position up to `position` has been learned. */
  learned(position: number): void;
  /** `position` is this process's own commit: its notification, before or after, counts nothing. */
  forget(position: number): void;
}

/**
 * Tells `observe` each delay, in milliseconds. A notification tagged with `origin` (this
 * instance's own writes carry it) counts nothing, whenever it comes.
 */
export function createChangeDelayTracker(
  observe: (ms: number) => void,
  wallNow: () => number = Date.now,
  origin?: string,
): ChangeDelayTracker {
  /** Commit times by position, in arrival order. */
  const pending = new Map<number, number>();
  /** Own positions whose notification has not arrived yet (bounded like `pending`). */
  const own = new Set<number>();
  const report = (committedAt: number) => observe(Math.max(0, wallNow() - committedAt));
  return {
    notified(payload, learnedUpTo) {
      const match = PAYLOAD.exec(payload);
      if (match === null) return;
      const [position, committedAt] = [Number(match[1]), Number(match[2])];
      if (own.delete(position) || (origin !== undefined && match[3] === origin)) return;
      if (learnedUpTo !== undefined && position <= learnedUpTo) return report(committedAt);
      if (pending.has(position)) return;
      pending.set(position, committedAt);
      if (pending.size > PENDING_NOTIFICATIONS) pending.delete(pending.keys().next().value!);
    },
    learned(position) {
      for (const [waiting, committedAt] of pending) {
        if (waiting > position) continue;
        report(committedAt);
        pending.delete(waiting);
      }
    },
    forget(position) {
      if (pending.delete(position)) return;
      own.add(position);
      if (own.size > PENDING_NOTIFICATIONS) own.delete(own.values().next().value!);
    },
  };
}
