/**
 * The grant epoch as seen by one instance: how it learns, within bounds,
 * that another instance ended a grant.
 *
 * The database holds one counter (`grant_epoch`), bumped in the same
 * transaction as every write that can end a grant, which also calls
 * `pg_notify('keygate_grants', epoch)`. Each instance:
 *
 * - listens on its own connection: a notification moves the epoch at once
 *   (milliseconds). Notifications are at-most-once (none arrive while the
 *   connection is down), so every (re)connect of the listener drops the
 *   whole cache and re-reads the epoch;
 * - polls the epoch every `pollMs` (default 500 ms), on the listener's
 *   connection (over the pool without one), so a lost notification, a dead listener or an engine without LISTEN
 *   (CockroachDB) still bounds how late a revocation is seen;
 * - is *confirmed* up to the start of its last successful poll. When that is
 *   older than `stalenessMs` (default 2 s), {@link GrantEpochWatcher.read}
 *   returns `undefined`: the instance cannot confirm that its cache is
 *   current and must not answer from it (the secure path fails closed, 503).
 *
 * {@link GrantEpochWatcher.read} is synchronous and cheap: the secure path
 * calls it on every request. It returns a local *version*, not the database
 * counter: it moves whenever the cache must be dropped (the database epoch
 * moved, or the listener reconnected). A cache stores an entry only if the
 * version did not move while the entry was read from the database.
 *
 * Exact within one process: notifications and polls bound how late an
 * instance sees *another process's* revocation, but the request workers of
 * one process (`--workers N`, each with its own store) share a
 * {@link SharedGrantCounter}. A store's grant-ending write increments it
 * (after its commit, before the write resolves) and every
 * {@link GrantEpochWatcher.read} compares it with the value it last saw, so a
 * sibling worker's revocation drops this cache on the very next request.
 *
 * @module
 */
import type postgres from "postgres";

/** The notification channel. */
export const GRANT_CHANNEL = "keygate_grants";

/** Default interval between polls of the epoch. */
export const DEFAULT_POLL_MS = 500;

/** Default bound after which an unconfirmed epoch fails the secure path closed. */
export const DEFAULT_STALENESS_MS = 2000;

/**
 * Bumps the epoch inside a write's transaction, and (unless `notify` is
 * false, for engines without NOTIFY) queues a notification that PostgreSQL
 * delivers when, and only if, the transaction commits. Returns the new epoch.
 */
export async function bumpGrantEpoch(
  tx: postgres.TransactionSql,
  notify = true,
): Promise<number> {
  const [row] = await tx<{ epoch: number }[]>`
    UPDATE grant_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch`;
  if (row === undefined) throw new Error("The grant_epoch row is missing");
  if (notify) await tx`SELECT pg_notify(${GRANT_CHANNEL}, ${String(row.epoch)})`;
  return Number(row.epoch);
}

/**
 * A process-wide count of the grant-ending writes committed by the stores
 * of one process: one 32-bit cell of a `SharedArrayBuffer`, created once by
 * the main thread and handed to every request worker. Only change matters
 * (it wraps around after 2^32 writes).
 */
export type SharedGrantCounter = Int32Array<SharedArrayBuffer>;

/** A new {@link SharedGrantCounter}, at 0. */
export function createSharedGrantCounter(): SharedGrantCounter {
  return new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
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
   * Shared with the other stores of this process: {@link GrantEpochWatcher.advanceTo}
   * increments it, and a change to it moves the version {@link GrantEpochWatcher.read} returns.
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
  /** The newest database epoch seen. */
  epoch: number;
}

/** One instance's view of the grant epoch. */
export interface GrantEpochWatcher {
  /**
   * A version that moves whenever cached grants must be dropped, or
   * `undefined` when the epoch has not been confirmed within the staleness
   * bound.
   */
  read(): number | undefined;
  /**
   * Records an epoch this instance's own write committed, so its cache drops at once, and
   * counts the write on the shared counter, so the caches of this process's other stores do.
   */
  advanceTo(epoch: number): void;
  /** Polls now; resolves when the poll ended (successfully or not). */
  pollNow(): Promise<void>;
  /**
   * Reads the epoch afresh (after any poll already under way, which may
   * have started before a change to be seen); for tools and tests that know
   * another process has just written.
   */
  refresh(): Promise<void>;
  /** Resolves once the epoch has been confirmed at least once (the first poll). */
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
  const shared = options.sharedCounter;
  for (const [name, value] of [["pollMs", pollMs], ["stalenessMs", stalenessMs]] as const) {
    if (!Number.isFinite(value) || value <= 0) {
      throw new RangeError(`Invalid ${name} "${value}": expected a positive number`);
    }
  }

  let epoch = 0;
  let version = 0;
  /** The shared counter's value when {@link GrantEpochWatcher.read} last looked. */
  let sharedSeen = shared === undefined ? 0 : Atomics.load(shared, 0);
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
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;
  let resolveReady!: () => void;
  const readyPromise = new Promise<void>((resolve) => (resolveReady = resolve));

  function moveTo(seen: number): void {
    if (seen > epoch) {
      epoch = seen;
      version++;
    }
  }

  /**
   * What a poll read, which is the database's current counter: a higher one
   * moves as {@link moveTo}; a lower one means the counter was set back (a
   * restore of an older dump), so the cache drops and later bumps from the
   * lower value count again. (A poll that started before a notification
   * arrived may read one lower too: that only drops the cache once more.)
   */
  function confirm(seen: number): void {
    if (seen < epoch) {
      epoch = seen;
      version++;
    } else moveTo(seen);
  }

  function dropAll(): void {
    version++;
  }

  async function poll(): Promise<void> {
    const startedAt = now();
    try {
      // Through the listener's own connection when there is one: a pool busy with requests
      // then cannot delay the confirmation past the staleness bound.
      const [row] = await (listenSql ?? sql)<{ epoch: number }[]>`
        SELECT epoch FROM grant_epoch WHERE id = 1`;
      if (row === undefined) throw new Error("The grant_epoch row is missing");
      confirm(Number(row.epoch));
      confirmedAt = Math.max(confirmedAt, startedAt);
      resolveReady();
    } catch {
      pollFailures++;
    }
    // The poll also revives a lost listener (postgres.js re-listens by itself only sometimes).
    if (listenSql !== undefined && !listening && !closed) void startListening();
  }

  function pollNow(): Promise<void> {
    polling ??= poll().finally(() => (polling = undefined));
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
        // Notifications sent while we were not listening are lost: start afresh.
        dropAll();
        report(true);
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
    onnotify(channel, payload) {
      if (channel !== GRANT_CHANNEL) return;
      notifications++;
      const seen = Number(payload);
      // A payload we cannot read still says something changed.
      if (Number.isSafeInteger(seen)) moveTo(seen);
      else dropAll();
    },
    onclose() {
      if (!listening) return;
      listening = false;
      dropAll();
      report(false);
    },
  });

  // Listen first, then poll: the epoch first confirmed is then one no notification can have
  // overtaken, and the listener's connecting does not drop a cache that is already in use.
  void (async () => {
    await startListening();
    if (!listening) await pollNow();
    schedule();
  })();

  return {
    read() {
      // One atomic load, no allocation: a sibling store's committed revocation moves the version.
      if (shared !== undefined) {
        const seen = Atomics.load(shared, 0);
        if (seen !== sharedSeen) {
          sharedSeen = seen;
          version++;
        }
      }
      return now() - confirmedAt <= stalenessMs ? version : undefined;
    },
    advanceTo(committed) {
      moveTo(committed);
      if (shared !== undefined) Atomics.add(shared, 0, 1);
    },
    pollNow,
    async refresh() {
      await polling;
      await pollNow();
    },
    ready: () => readyPromise,
    stats: () => ({
      notifications,
      listens,
      pollFailures,
      lagMs: Math.max(0, now() - confirmedAt),
      listening,
      epoch,
    }),
    async close() {
      closed = true;
      clearTimeout(timer);
      await polling;
      await listenAttempt;
      listening = false;
      await listenSql?.end({ timeout: 0 });
    },
  };
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
