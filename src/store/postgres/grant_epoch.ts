/**
 * The grant change record as seen by one instance: how it learns, exactly and within bounds,
 * which grants another instance ended.
 *
 * The database holds a counter (`grant_epoch`) and a change record (`grant_changes`). Every
 * write that can end a grant bumps the counter in its last statement (the row's lock orders
 * positions as commits, without gaps) and records its scopes (one token, one API key, one user,
 * or everything) at the new position, with one random tag, in the same transaction, then calls
 * `pg_notify('keygate_grants', …)`. Each instance:
 *
 * - **polls** the record every `pollMs` (default 500 ms), on the listener's connection (over
 *   the pool without one): in one statement, the counter, the tag at the position it has seen,
 *   and the rows after it. The poll is the only thing that moves the position seen. Rows are
 *   learned as scopes ({@link GrantChangeLog}); whatever the record cannot account for (the
 *   counter went back, the tag at the position seen changed: a restored backup; a position
 *   without rows: a hand-made bump, or rows pruned before this instance read them) is learned
 *   as `all`, which empties the caches (grant_change_log.ts);
 * - **listens** on its own connection: a notification, whatever its payload says (any role
 *   with CONNECT can send one), only makes the poll run now (or, in a burst, within a few ms of
 *   the last poll: poll_loop.ts). So a lost notification costs time, never exactness, and a
 *   spoofed or malformed one costs a poll, never more than that gap; a (re)connected listener
 *   needs no drop either, only a poll;
 * - **learns its own commits at once**: a write applies its scopes before it resolves (and so
 *   before the response is sent), and appends them to a ring of scopes shared by the stores of
 *   its process ({@link SharedGrantCounter}), which every {@link GrantEpochWatcher.read} reads:
 *   a sibling worker's revocation is evicted on the very next request. The poll later meets the
 *   same positions and skips them (they were learned);
 * - is *confirmed* up to the start of its last successful poll. When that is older than
 *   `stalenessMs` (default 2 s), {@link GrantEpochWatcher.read} returns `undefined`: the
 *   instance cannot confirm that its cache is current and must not answer from it (the secure
 *   path fails closed, 503).
 *
 * {@link GrantEpochWatcher.read} is synchronous and cheap (one atomic load and a clock read):
 * the secure path calls it on every request. It returns the local position of the log.
 *
 * The poll's statement is in grant_poll.ts, when it runs in poll_loop.ts, the listener in
 * grant_listener.ts and the shared ring in grant_ring.ts; this module keeps the position seen and puts them together.
 *
 * @module
 */
import type postgres from "postgres";
import {
  ALL,
  createGrantChangeLog,
  type GrantChangeLog,
  type RecordCursor,
  toRecordedScopes,
} from "../grant_change_log.ts";
import type { GrantEpoch, GrantInvalidations, GrantScope } from "../store_types.ts";
import { createGrantListener, GRANT_CHANNEL, type ListenerHooks } from "./grant_listener.ts";
import { createChangeDelayTracker } from "./change_delay.ts";
import { readChangeRecord, type RecordSnapshot } from "./grant_poll.ts";
import { createPollLoop } from "./poll_loop.ts";
import { appendOwn, readRingSince, type SharedGrantCounter } from "./grant_ring.ts";

export { GRANT_CHANNEL, type ListenerHooks } from "./grant_listener.ts";
export { createSharedGrantCounter, type SharedGrantCounter } from "./grant_ring.ts";

/** Default interval between polls of the epoch. */
export const DEFAULT_POLL_MS = 500;

/** Default bound after which an unconfirmed epoch fails the secure path closed. */
export const DEFAULT_STALENESS_MS = 2000;

/**
 * Records `scopes` as one change, as a write's last statement does (db.ts): bumps the epoch
 * inside a transaction, records the scopes at the new position and (unless `notify` is false,
 * for engines without NOTIFY) queues a notification that PostgreSQL delivers when, and only
 * if, the transaction commits. Returns the new position. For tools and tests.
 */
export async function bumpGrantEpoch(
  tx: postgres.TransactionSql,
  notify = true,
  scopes: readonly GrantScope[] = [ALL],
): Promise<number> {
  const rows = scopes.map((scope) => ({
    scope: scope.kind,
    subject: scope.kind === "all" ? null : scope.id,
  }));
  const [row] = await tx<{ epoch: number }[]>`
    WITH bumped AS (
      UPDATE grant_epoch SET epoch = epoch + 1 WHERE id = 1
      RETURNING epoch, floor(random() * 4503599627370496)::bigint AS tag
    ), recorded AS (
      INSERT INTO grant_changes (position, scope, subject, tag)
      SELECT b.epoch, c.scope, c.subject, b.tag FROM bumped b
      CROSS JOIN jsonb_to_recordset(${tx.json(rows)}) AS c(scope text, subject bigint)
    )
    SELECT epoch FROM bumped`;
  if (row === undefined) throw new Error("The grant_epoch row is missing");
  if (notify) await tx`SELECT pg_notify(${GRANT_CHANNEL}, ${String(row.epoch)})`;
  return Number(row.epoch);
}

/** Options for {@link createGrantEpochWatcher}. */
export interface GrantEpochWatcherOptions {
  /** The pool to poll through. */
  sql: postgres.Sql;
  /**
   * Opens the listener's own client (a pool of one connection) with the
   * given callbacks, or `undefined` to poll only (an engine without LISTEN).
   */
  openListener?: (hooks: ListenerHooks) => postgres.Sql;
  pollMs?: number;
  stalenessMs?: number;
  /** A monotonic clock in milliseconds. Default `performance.now`. */
  monotonicNow?: () => number;
  /**
   * Told when the listener connects or is lost, for logs: once per change, not at every
   * failed attempt to listen again (each poll makes one while the database is away).
   */
  onListenerChange?: (listening: boolean, error?: unknown) => void;
  /**
   * Shared with the other stores of this process: {@link GrantEpochWatcher.learnOwn} appends
   * to it, and {@link GrantEpochWatcher.read} learns what the others appended.
   */
  sharedCounter?: SharedGrantCounter;
  /**
   * Told, in milliseconds, how long each change another instance notified took from its commit
   * to this instance having learned it (change_delay.ts; a metric, never a fact).
   */
  onChangeDelay?: (ms: number) => void;
}

/** Counters for metrics. */
export interface GrantEpochStats {
  /** Notifications received on the listener. */
  notifications: number;
  /** Times the listener (re)connected. */
  listens: number;
  /** Polls that succeeded. */
  polls: number;
  /** Of those, polls that found no position this instance had not read (nothing new). */
  emptyPolls: number;
  /** Rows of the change record the polls read (one per scope recorded after the position seen). */
  rowsRead: number;
  /** Polls that failed. */
  pollFailures: number;
  /** Milliseconds since the epoch was last confirmed. */
  lagMs: number;
  /** Whether the listener connection is up. */
  listening: boolean;
  /** The newest database position the poll has read. */
  epoch: number;
}

/** One instance's view of the grant change record. */
export interface GrantEpochWatcher {
  /**
   * The local position of the changes learned (see `Store.readGrantEpoch`), or `undefined`
   * when the record has not been confirmed within the staleness bound.
   */
  read(): GrantEpoch | undefined;
  /** See `Store.readGrantChanges`. */
  changesSince(since: GrantEpoch): readonly GrantScope[] | undefined;
  /** Changes learned, by scope. */
  invalidations(): GrantInvalidations;
  /**
   * Learns a change this instance's own write committed, so its caches evict it at once, and
   * shares it with this process's other stores. The position seen does not move: the poll
   * reads the record, meets this position and skips what it already learned.
   */
  learnOwn(change: { position: number; scopes: readonly GrantScope[] }): void;
  /** This store's tag in its writes' notifications (change_delay.ts): random, per store. */
  readonly origin: string;
  /** Polls now (or once more after a poll under way); resolves when that poll ended. */
  pollNow(): Promise<void>;
  /**
   * Reads the record afresh (after any poll already under way, which may have started before
   * a change to be seen); for tools and tests that know another process has just written.
   */
  refresh(): Promise<void>;
  /** Resolves once the record has been confirmed at least once (the first poll). */
  ready(): Promise<void>;
  stats(): GrantEpochStats;
  /** Stops polling and listening. */
  close(): Promise<void>;
}

/** Where an instance stands in the change record. */
interface Seen {
  /** Where the poll stands in the record; `undefined` before the first poll. */
  cursor: RecordCursor | undefined;
  /** The change record's table as the last poll saw it (its oid): a restore makes a new one. */
  identity: string | undefined;
  /** Positions learned from this process's own commits, ahead of the poll. */
  learned: Set<number>;
}

/** Learns into `log` what one poll's `read` says after the position `seen`, and moves it. */
function learnRead(log: GrantChangeLog, seen: Seen, read: RecordSnapshot): void {
  const recreated = seen.identity !== undefined && read.identity !== seen.identity;
  seen.identity = read.identity;
  if (seen.cursor === undefined) seen.cursor = read.head; // the caches start empty
  else if (recreated) {
    // Restored from a backup, even to the very position and tag seen: what the caches hold
    // may be gone from the database, and no row of the record says so. Drop everything.
    log.push(ALL);
    seen.cursor = read.head;
    seen.learned.clear();
  } else {
    const recorded = toRecordedScopes(seen.cursor, read);
    if (!recorded.exact) log.push(ALL);
    else {
      // Positions learned from this process's own commits are not learned twice.
      recorded.scopes.forEach((scope, i) => {
        if (!seen.learned.has(read.rows[i].position)) log.push(scope);
      });
    }
    seen.cursor = recorded.cursor;
    for (const position of seen.learned) {
      if (position <= seen.cursor.position) seen.learned.delete(position);
    }
  }
}

/** Throws a RangeError unless every value is a positive number. */
function checkPositive(values: Record<string, number>): void {
  for (const [name, value] of Object.entries(values)) {
    if (!Number.isFinite(value) || value <= 0) {
      throw new RangeError(`Invalid ${name} "${value}": expected a positive number`);
    }
  }
}

/**
 * Learns what this process's other stores committed (see {@link SharedGrantCounter}): their
 * scopes, as this instance's own commits; everything, when the ring lost some.
 */
function learnRing(
  into: {
    log: ReturnType<typeof createGrantChangeLog>;
    seen: Seen;
    delays: { forget(position: number): void } | undefined;
  },
  { entries, complete }: ReturnType<typeof readRingSince>,
): void {
  const { log, seen, delays } = into;
  for (const entry of entries) {
    log.push(entry.scope);
    delays?.forget(entry.position); // a sibling worker's commit: this instance's own
    if (seen.cursor === undefined || entry.position > seen.cursor.position) {
      seen.learned.add(entry.position);
    }
  }
  if (!complete) log.push(ALL);
}

/** Starts watching. The first poll starts at once; see {@link GrantEpochWatcher.ready}. */
export function createGrantEpochWatcher(options: GrantEpochWatcherOptions): GrantEpochWatcher {
  const { sql } = options;
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  const stalenessMs = options.stalenessMs ?? DEFAULT_STALENESS_MS;
  const now = options.monotonicNow ?? (() => performance.now());
  const ring = options.sharedCounter;
  checkPositive({ pollMs, stalenessMs });

  const log = createGrantChangeLog();
  const seen: Seen = { cursor: undefined, identity: undefined, learned: new Set() };
  /** The ring's head when {@link GrantEpochWatcher.read} last looked. */
  let ringSeen = ring === undefined ? 0 : Atomics.load(ring.head, 0);
  /** Monotonic time at which the last successful poll started; -Infinity before the first. */
  let confirmedAt = -Infinity;
  /** Polls made (successful), those that found nothing new, rows they read, and failed ones. */
  const counts = { polls: 0, emptyPolls: 0, rowsRead: 0, pollFailures: 0 };
  let closed = false;
  let resolveReady!: () => void;
  const readyPromise = new Promise<void>((resolve) => (resolveReady = resolve));

  /** Learns what the record says after the position seen (see the module doc). */
  async function poll(): Promise<void> {
    const startedAt = now();
    try {
      // Through the listener's own connection when there is one: a pool busy with requests then
      // cannot delay the confirmation past the staleness bound.
      const read = await readChangeRecord(listener.sql ?? sql, seen.cursor?.position ?? 0);
      counts.polls++;
      counts.rowsRead += read.rows.length;
      if (seen.cursor !== undefined && read.head.position === seen.cursor.position) {
        counts.emptyPolls++;
      }
      learnRead(log, seen, read);
      if (seen.cursor !== undefined) delays?.learned(seen.cursor.position);
      confirmedAt = Math.max(confirmedAt, startedAt);
      resolveReady();
    } catch {
      counts.pollFailures++;
    }
    // The poll also revives a lost listener (postgres.js re-listens by itself only sometimes).
    if (listener.sql !== undefined && !listener.listening && !closed) void listener.start();
  }

  const loop = createPollLoop(poll, { pollMs, now });
  const pollNow = loop.pollNow;

  const origin = crypto.randomUUID().replaceAll("-", "").slice(0, 16);
  const delays = options.onChangeDelay === undefined
    ? undefined
    : createChangeDelayTracker(options.onChangeDelay, Date.now, origin);
  const listener = createGrantListener({
    openListener: options.openListener,
    onListenerChange: options.onListenerChange,
    pollNow,
    pollSoon: loop.pollSoon,
    onPayload: delays === undefined
      ? undefined
      : (payload) => delays.notified(payload, seen.cursor?.position),
  });

  // Listen first, then poll: the position first confirmed is then one no notification can
  // have overtaken.
  void (async () => {
    await listener.start();
    if (!listener.listening) await pollNow();
    loop.schedule();
  })();

  return {
    origin,
    read() {
      if (ring !== undefined) {
        // One atomic load when nothing moved.
        const head = Atomics.load(ring.head, 0);
        if (head !== ringSeen) {
          learnRing({ log, seen, delays }, readRingSince(ring, ringSeen, head));
          ringSeen = head;
        }
      }
      return now() - confirmedAt <= stalenessMs ? log.position() : undefined;
    },
    changesSince: (since) => log.since(since),
    invalidations: () => log.counts(),
    learnOwn(change) {
      delays?.forget(change.position); // not another instance's change: no delay to report
      // A poll prompted by our own notification may have read this position already.
      if (seen.cursor === undefined || change.position > seen.cursor.position) {
        for (const scope of change.scopes) log.push(scope);
        seen.learned.add(change.position);
      }
      if (ring !== undefined) ringSeen = appendOwn(ring, change.scopes, change.position, ringSeen);
    },
    pollNow,
    async refresh() {
      await pollNow();
    },
    ready: () => readyPromise,
    stats: () => ({
      notifications: listener.notifications,
      listens: listener.listens,
      ...counts,
      lagMs: Math.max(0, now() - confirmedAt),
      listening: listener.listening,
      epoch: seen.cursor?.position ?? 0,
    }),
    async close() {
      closed = true;
      await loop.close();
      await listener.close();
    },
  };
}
