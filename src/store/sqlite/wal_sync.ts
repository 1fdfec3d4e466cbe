/**
 * The durable point of durability `"grants"` (connection.ts): after a commit that can end a
 * grant, the database's -wal file is synced before the write resolves.
 *
 * The sync (`fdatasync`) runs on Deno's thread pool, so the event loop keeps serving secure
 * requests while the disk flushes, and commits are grouped: a write awaits a sync that started
 * after its commit; commits that land while a sync runs share the next one. So there is one
 * sync in flight and at most one queued, however many revocations arrive: n concurrent
 * grant-ending writes cost about two flushes, not n.
 *
 * A failed sync is fatal for the group until the process restarts, as in PostgreSQL: on Linux a
 * failed `fsync` can mark the unwritten pages clean, so a later sync that succeeds proves nothing
 * about the commits before it. Every write waiting on it, and every later one, fails with
 * `StoreUnavailable` (503); {@link WalSyncGroup.findSyncFailure} keeps the disk's message for
 * readiness and the log. Restarting lets SQLite recover from what the -wal file really holds.
 *
 * @module
 */
import { StoreUnavailable } from "../errors.ts";
import { toErrorText } from "../../platform/logger.ts";

/**
 * Runs one sync of the -wal file: given the real sync, resolves when it has completed.
 * The default calls it; tests hold a sync open with it to observe who waits.
 */
export type WalSyncRunner = (sync: () => Promise<void>) => Promise<void>;

/** The -wal file's syncs, grouped. */
export interface WalSyncGroup {
  /**
   * Resolves once a sync that started after this call has completed.
   *
   * @throws StoreUnavailable when that sync failed, or any sync of this group before.
   */
  afterCommit(): Promise<void>;
  /** The first failed sync's reason (the disk's message), if one failed: fatal until restart. */
  findSyncFailure(): string | undefined;
  /** Syncs started since opening. */
  readSyncs(): number;
  close(): void;
}

/** How a group runs its syncs, and who hears that one failed. */
export interface WalSyncOptions {
  /** Default: runs the sync. */
  runSync?: WalSyncRunner;
  /** Hears the first failed sync's reason, once: the store is unusable until a restart. */
  onFailure?(reason: string): void;
}

/** Opens the -wal file beside the database at `realPath` (its real path) for syncing. */
export function openWalSyncGroup(realPath: string, options: WalSyncOptions = {}): WalSyncGroup {
  // The -wal file exists once the connection has read in WAL mode (the migrations did).
  // SQLite holds no POSIX locks on it, so this descriptor can be closed at any time.
  const file = Deno.openSync(`${realPath}-wal`, { read: true });
  const group = createWalSyncGroup(options.runSync ?? ((sync) => sync()), () => file.syncData(), {
    onFailure: options.onFailure,
  });
  return { ...group, close: () => file.close() };
}

/** Groups the calls of `sync` (wrapped by `runSync`): one in flight, at most one queued. */
export function createWalSyncGroup(
  runSync: WalSyncRunner,
  sync: () => Promise<void>,
  options: Pick<WalSyncOptions, "onFailure"> = {},
): Omit<WalSyncGroup, "close"> {
  let syncs = 0;
  let failure: string | undefined;
  /** The sync in flight. */
  let running: Promise<void> | undefined;
  /** The sync that starts when `running` settles, shared by the commits made meanwhile. */
  let queued: Promise<void> | undefined;

  const toUnavailable = (cause?: unknown) => toSyncFailureError(failure!, cause);

  async function syncOnce(): Promise<void> {
    try {
      await runSync(sync);
    } catch (error) {
      if (failure === undefined) {
        failure = toErrorText(error).slice(0, 200);
        options.onFailure?.(failure);
      }
      throw toUnavailable(error);
    }
  }

  function start(): Promise<void> {
    syncs++;
    const done = syncOnce();
    running = done;
    const settle = () => {
      if (running === done) running = undefined;
    };
    done.then(settle, settle);
    return done;
  }

  return {
    afterCommit() {
      if (failure !== undefined) return Promise.reject(toUnavailable());
      if (queued !== undefined) return queued;
      if (running === undefined) return start();
      const next = running.then(noop, noop).then(() => {
        queued = undefined;
        // Queued behind a sync that failed: no later sync proves anything about its commits.
        return failure === undefined ? start() : Promise.reject(toUnavailable());
      });
      queued = next;
      return next;
    },
    findSyncFailure: () => failure,
    readSyncs: () => syncs,
  };
}

/** The error of every write after a failed sync, whose `reason` is the disk's message. */
export function toSyncFailureError(reason: string, cause?: unknown): StoreUnavailable {
  return new StoreUnavailable(
    `The database is unavailable: a sync of its write-ahead log failed (restart keygate): ${reason}`,
    { cause },
  );
}

function noop(): void {}

/** Fails a write before it starts once a WAL sync has failed. */
export function refuseAfterSyncFailure(syncWal: WalSyncGroup | undefined): void {
  const failure = syncWal?.findSyncFailure();
  if (failure === undefined) return;
  throw toSyncFailureError(failure);
}
