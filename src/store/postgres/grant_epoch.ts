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
 *   with CONNECT can send one), only makes the poll run now. So a lost notification costs time,
 *   never exactness, and a spoofed or malformed one costs a poll, never a delay; a (re)connected
 *   listener needs no drop either, only a poll;
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
 * @module
 */
import type postgres from "postgres";
import {
  ALL,
  createGrantChangeLog,
  type RecordCursor,
  type RecordRow,
  toRecordedScopes,
} from "../grant_change_log.ts";
import type { GrantEpoch, GrantInvalidations, GrantScope } from "../store_types.ts";

/** The notification channel. */
export const GRANT_CHANNEL = "keygate_grants";

/** Default interval between polls of the epoch. */
export const DEFAULT_POLL_MS = 500;

/** Default bound after which an unconfirmed epoch fails the secure path closed. */
export const DEFAULT_STALENESS_MS = 2000;

/** Rows of the change record one poll reads; an instance further behind drops its caches. */
const POLL_ROWS = 10_000;

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

/** Entries of a {@link SharedGrantCounter}'s ring. */
const RING_ENTRIES = 1024;

/** Scope kinds as numbers in the ring. */
const KINDS = ["token", "key", "user", "all"] as const;

/**
 * The scopes committed by the stores of one process, for each other (`--workers`): a ring of
 * the last {@link RING_ENTRIES} in `SharedArrayBuffer`s, created once by the main thread and
 * handed to every request worker. A writer reserves a sequence number (`head`), then writes
 * its entry between two stamps; a reader accepts an entry only if both stamps carry its
 * sequence number, and learns `all` for one it cannot read (being written, or overwritten
 * because it fell behind): never a wrong scope, at worst an emptied cache.
 */
export interface SharedGrantCounter {
  readonly head: Int32Array<SharedArrayBuffer>;
  readonly before: Int32Array<SharedArrayBuffer>;
  readonly after: Int32Array<SharedArrayBuffer>;
  readonly kinds: Int32Array<SharedArrayBuffer>;
  readonly subjects: Float64Array<SharedArrayBuffer>;
  readonly positions: Float64Array<SharedArrayBuffer>;
}

/** A new, empty {@link SharedGrantCounter}. */
export function createSharedGrantCounter(): SharedGrantCounter {
  const ints = (length: number) =>
    new Int32Array(new SharedArrayBuffer(length * Int32Array.BYTES_PER_ELEMENT));
  const floats = (length: number) =>
    new Float64Array(new SharedArrayBuffer(length * Float64Array.BYTES_PER_ELEMENT));
  const before = ints(RING_ENTRIES).fill(-1);
  const after = ints(RING_ENTRIES).fill(-1);
  return {
    head: ints(1),
    before,
    after,
    kinds: ints(RING_ENTRIES),
    subjects: floats(RING_ENTRIES),
    positions: floats(RING_ENTRIES),
  };
}

function slotOf(sequence: number): number {
  return ((sequence % RING_ENTRIES) + RING_ENTRIES) % RING_ENTRIES;
}

/** Appends one committed scope (at database position `position`) to the ring. */
function publish(ring: SharedGrantCounter, scope: GrantScope, position: number): void {
  const sequence = (Atomics.add(ring.head, 0, 1) + 1) | 0;
  const slot = slotOf(sequence);
  Atomics.store(ring.before, slot, sequence);
  ring.kinds[slot] = KINDS.indexOf(scope.kind);
  ring.subjects[slot] = scope.kind === "all" ? 0 : scope.id;
  ring.positions[slot] = position;
  Atomics.store(ring.after, slot, sequence);
}

/** The entry with this sequence number, or `undefined` if it cannot be read now. */
function readEntry(
  ring: SharedGrantCounter,
  sequence: number,
): { scope: GrantScope; position: number } | undefined {
  const slot = slotOf(sequence);
  if (Atomics.load(ring.after, slot) !== sequence) return undefined;
  const kind = KINDS[ring.kinds[slot]];
  const id = ring.subjects[slot];
  const position = ring.positions[slot];
  if (Atomics.load(ring.before, slot) !== sequence || kind === undefined) return undefined;
  return { scope: kind === "all" ? ALL : { kind, id }, position };
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
}

/** Counters for metrics. */
export interface GrantEpochStats {
  /** Notifications received on the listener. */
  notifications: number;
  /** Times the listener (re)connected. */
  listens: number;
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

/** Starts watching. The first poll starts at once; see {@link GrantEpochWatcher.ready}. */
export function createGrantEpochWatcher(options: GrantEpochWatcherOptions): GrantEpochWatcher {
  const { sql } = options;
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  const stalenessMs = options.stalenessMs ?? DEFAULT_STALENESS_MS;
  const now = options.monotonicNow ?? (() => performance.now());
  const ring = options.sharedCounter;
  for (const [name, value] of [["pollMs", pollMs], ["stalenessMs", stalenessMs]] as const) {
    if (!Number.isFinite(value) || value <= 0) {
      throw new RangeError(`Invalid ${name} "${value}": expected a positive number`);
    }
  }

  const log = createGrantChangeLog();
  /** Where the poll stands in the record; `undefined` before the first poll. */
  let cursor: RecordCursor | undefined;
  /** Positions learned from this process's own commits, ahead of the poll. */
  const learned = new Set<number>();
  /** The ring's head when {@link GrantEpochWatcher.read} last looked. */
  let ringSeen = ring === undefined ? 0 : Atomics.load(ring.head, 0);
  /** Monotonic time at which the last successful poll started; -Infinity before the first. */
  let confirmedAt = -Infinity;
  let notifications = 0;
  let listens = 0;
  let pollFailures = 0;
  let listening = false;
  let listenAttempt: Promise<void> | undefined;
  /** What {@link GrantEpochWatcherOptions.onListenerChange} was last told. */
  let reported: boolean | undefined;
  let polling: Promise<void> | undefined;
  /** The change record's table as the last poll saw it (its oid): a restore makes a new one. */
  let identity: string | undefined;
  /** The poll that follows the one under way (asked for after it started). */
  let queued: Promise<void> | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;
  let resolveReady!: () => void;
  const readyPromise = new Promise<void>((resolve) => (resolveReady = resolve));

  async function poll(): Promise<void> {
    const startedAt = now();
    const from = cursor?.position ?? 0;
    try {
      // One statement, so one snapshot: the counter, the tag at the position seen, the rows
      // after it. Through the listener's own connection when there is one: a pool busy with
      // requests then cannot delay the confirmation past the staleness bound.
      const [row] = await (listenSql ?? sql)<{
        head: string;
        head_tag: string | null;
        cursor_tag: string | null;
        rows: [number, string, number | null][];
        identity: string;
      }[]>`
        SELECT e.epoch AS head,
          -- A restore (pg_restore --clean, or a new database) recreates the table: a new oid.
          (SELECT 'grant_changes'::regclass::oid::text) AS identity,
          (SELECT tag FROM grant_changes WHERE position = e.epoch LIMIT 1) AS head_tag,
          (SELECT tag FROM grant_changes WHERE position = ${from} LIMIT 1) AS cursor_tag,
          coalesce((SELECT jsonb_agg(jsonb_build_array(position, scope, subject) ORDER BY position)
            FROM (SELECT position, scope, subject FROM grant_changes
              WHERE position > ${from} AND position <= e.epoch
              ORDER BY position LIMIT ${POLL_ROWS + 1}) AS r), '[]') AS rows
        FROM grant_epoch e WHERE e.id = 1`;
      if (row === undefined) throw new Error("The grant_epoch row is missing");
      const head = { position: Number(row.head), tag: toTag(row.head_tag) };
      const recreated = identity !== undefined && row.identity !== identity;
      identity = row.identity;
      if (cursor === undefined) cursor = head; // the caches start empty
      else if (recreated) {
        // Restored from a backup, even to the very position and tag seen: what the caches hold
        // may be gone from the database, and no row of the record says so. Drop everything.
        log.push(ALL);
        cursor = head;
        learned.clear();
      } else {
        const rows: RecordRow[] = row.rows.map(([position, scope, subject]) => ({
          position,
          scope,
          subject,
        }));
        const truncated = rows.length > POLL_ROWS;
        const read = toRecordedScopes(cursor, {
          head,
          tagAtCursor: toTag(row.cursor_tag),
          rows,
          truncated,
        });
        if (!read.exact) log.push(ALL);
        else {
          // Positions learned from this process's own commits are not learned twice.
          read.scopes.forEach((scope, i) => {
            if (!learned.has(rows[i].position)) log.push(scope);
          });
        }
        cursor = read.cursor;
        for (const position of learned) if (position <= cursor.position) learned.delete(position);
      }
      confirmedAt = Math.max(confirmedAt, startedAt);
      resolveReady();
    } catch {
      pollFailures++;
    }
    // The poll also revives a lost listener (postgres.js re-listens by itself only sometimes).
    if (listenSql !== undefined && !listening && !closed) void startListening();
  }

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
    polling = poll().finally(() => (polling = undefined));
    return polling;
  }

  function schedule(): void {
    if (closed) return;
    timer = setTimeout(async () => {
      await pollNow();
      schedule();
    }, pollMs);
    Deno.unrefTimer(timer);
  }

  function report(up: boolean, error?: unknown): void {
    if (reported === up) return;
    reported = up;
    options.onListenerChange?.(up, error);
  }

  function startListening(): Promise<void> {
    if (listenSql === undefined) return Promise.resolve();
    listenAttempt ??= (async () => {
      try {
        await listenSql.unsafe(`LISTEN ${GRANT_CHANNEL}`);
        listening = true;
        listens++;
        report(true);
        // Notifications sent while we were not listening are lost: the record has them.
        await pollNow();
      } catch (error) {
        listening = false;
        report(false, error);
      } finally {
        listenAttempt = undefined;
      }
    })();
    return listenAttempt;
  }

  const listenSql = options.openListener?.({
    onnotify(channel) {
      if (channel !== GRANT_CHANNEL) return;
      notifications++;
      // A prompt, never a fact: whatever the payload says, only the record is believed.
      void pollNow();
    },
    onclose() {
      if (!listening) return;
      listening = false;
      report(false);
    },
  });

  /** Learns what this process's other stores committed (see {@link SharedGrantCounter}). */
  function readRing(shared: SharedGrantCounter, head: number): void {
    const behind = (head - ringSeen) | 0;
    if (behind < 0 || behind > RING_ENTRIES) log.push(ALL);
    else {
      for (let i = 1; i <= behind; i++) {
        const entry = readEntry(shared, (ringSeen + i) | 0);
        if (entry === undefined) {
          log.push(ALL);
          break;
        }
        log.push(entry.scope);
        if (cursor === undefined || entry.position > cursor.position) learned.add(entry.position);
      }
    }
    ringSeen = head;
  }

  // Listen first, then poll: the position first confirmed is then one no notification can
  // have overtaken.
  void (async () => {
    await startListening();
    if (!listening) await pollNow();
    schedule();
  })();

  return {
    read() {
      if (ring !== undefined) {
        // One atomic load when nothing moved.
        const head = Atomics.load(ring.head, 0);
        if (head !== ringSeen) readRing(ring, head);
      }
      return now() - confirmedAt <= stalenessMs ? log.position() : undefined;
    },
    changesSince: (since) => log.since(since),
    invalidations: () => log.counts(),
    learnOwn(change) {
      // A poll prompted by our own notification may have read this position already.
      if (cursor === undefined || change.position > cursor.position) {
        for (const scope of change.scopes) log.push(scope);
        learned.add(change.position);
      }
      if (ring !== undefined) {
        const expected = (Atomics.load(ring.head, 0) + change.scopes.length) | 0;
        const caughtUp = Atomics.load(ring.head, 0) === ringSeen;
        for (const scope of change.scopes) publish(ring, scope, change.position);
        // Our own entries are learned already; when another store's came in between, the
        // next read learns ours again with them (an eviction repeated, nothing missed).
        if (caughtUp && Atomics.load(ring.head, 0) === expected) ringSeen = expected;
      }
    },
    pollNow,
    async refresh() {
      await pollNow();
    },
    ready: () => readyPromise,
    stats: () => ({
      notifications,
      listens,
      pollFailures,
      lagMs: Math.max(0, now() - confirmedAt),
      listening,
      epoch: cursor?.position ?? 0,
    }),
    async close() {
      closed = true;
      clearTimeout(timer);
      await polling;
      await queued;
      await listenAttempt;
      listening = false;
      await listenSql?.end({ timeout: 0 });
    },
  };
}

/** A tag as PostgreSQL returns a bigint (text), as a number. */
function toTag(value: string | number | null): number | null {
  return value === null ? null : Number(value);
}

/**
 * The callbacks a listener client must be created with: they route
 * notifications and connection loss into a watcher made with
 * {@link createGrantEpochWatcher}. postgres.js takes `onnotify` and
 * `onclose` only at creation, so they are bound late.
 */
export interface ListenerHooks {
  onnotify(channel: string, payload: string): void;
  onclose(): void;
}
