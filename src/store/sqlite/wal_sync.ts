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
 * A failed sync fails every write waiting on it (`StoreUnavailable`: 503, retry). Their commits
 * stay applied, but the connection then owes a sync: every write, even one that ended no grant
 * (a retried revocation finds the token revoked already and changes no row), awaits a sync
 * until one succeeds, so no write is answered as done while its commit may not be on disk.
 *
 * @module
 */
import { StoreUnavailable } from "../errors.ts";

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
   * @throws StoreUnavailable when that sync failed.
   */
  afterCommit(): Promise<void>;
  /** Whether the last sync failed (and none has succeeded since): writes must await one. */
  owesSync(): boolean;
  /** Syncs now, blocking, for a commit made outside `write()`. */
  syncNow(): void;
  /** Syncs started since opening. */
  readSyncs(): number;
  close(): void;
}

/** Opens the -wal file beside the database at `realPath` (its real path) for syncing. */
export function openWalSyncGroup(realPath: string, runSync?: WalSyncRunner): WalSyncGroup {
  // The -wal file exists once the connection has read in WAL mode (the migrations did).
  // SQLite holds no POSIX locks on it, so this descriptor can be closed at any time.
  const file = Deno.openSync(`${realPath}-wal`, { read: true });
  const group = createWalSyncGroup(runSync ?? ((sync) => sync()), () => file.syncData());
  return {
    ...group,
    syncNow() {
      group.countSync();
      file.syncDataSync();
    },
    close: () => file.close(),
  };
}

/** Groups the calls of `sync` (wrapped by `runSync`): one in flight, at most one queued. */
export function createWalSyncGroup(
  runSync: WalSyncRunner,
  sync: () => Promise<void>,
): Omit<WalSyncGroup, "syncNow" | "close"> & { countSync(): void } {
  let syncs = 0;
  let owed = false;
  /** The sync in flight. */
  let running: Promise<void> | undefined;
  /** The sync that starts when `running` settles, shared by the commits made meanwhile. */
  let queued: Promise<void> | undefined;

  async function syncOnce(): Promise<void> {
    try {
      await runSync(sync);
      owed = false;
    } catch (error) {
      owed = true;
      const reason = error instanceof Error ? error.message : String(error);
      throw new StoreUnavailable(
        `The database is unavailable: cannot sync its write-ahead log: ${reason}`,
        { cause: error },
      );
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
      if (queued !== undefined) return queued;
      if (running === undefined) return start();
      const next = running.then(noop, noop).then(() => {
        queued = undefined;
        return start();
      });
      queued = next;
      return next;
    },
    owesSync: () => owed,
    readSyncs: () => syncs,
    countSync() {
      syncs++;
    },
  };
}

function noop(): void {}
