/**
 * A WAL sync runner (`SqliteStoreOptions.runWalSync`) that holds every sync until the test
 * releases it (the real sync then runs) or fails it: what the durability tests use to see,
 * without timing, which writes wait for which sync.
 *
 * @module
 */
import type { WalSyncRunner } from "../../src/store/sqlite/wal_sync.ts";

/** One sync the runner was asked for, held. */
export interface HeldSync {
  /** Runs the real sync, then lets the sync complete. */
  release(): Promise<void>;
  /** Makes the sync fail with `error` (the real one does not run). */
  fail(error: Error): void;
}

/** The runner, and the syncs it has been asked for. */
export interface HeldWalSync {
  runWalSync: WalSyncRunner;
  /** The syncs asked for so far, in order. */
  readonly syncs: readonly HeldSync[];
  /** Resolves once `count` syncs have been asked for. */
  waitForSyncs(count: number): Promise<void>;
}

export function createHeldWalSync(): HeldWalSync {
  const syncs: HeldSync[] = [];
  const waiters: { count: number; resolve(): void }[] = [];
  function wakeWaiters(): void {
    for (const waiter of waiters.filter((w) => syncs.length >= w.count)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }
  return {
    runWalSync(sync) {
      return new Promise<void>((resolve, reject) => {
        syncs.push({
          async release() {
            await sync().then(resolve, reject);
          },
          fail: reject,
        });
        wakeWaiters();
      });
    },
    syncs,
    waitForSyncs(count) {
      const waited = new Promise<void>((resolve) => {
        waiters.push({ count, resolve });
        wakeWaiters();
      });
      // A write that never asks for its sync fails the test instead of hanging it.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`Not ${count} syncs within ${SYNC_DEADLINE_MS} ms`)),
          SYNC_DEADLINE_MS,
        );
      });
      return Promise.race([waited, deadline]).finally(() => clearTimeout(timer));
    },
  };
}

/** How long {@link HeldWalSync.waitForSyncs} waits: far beyond any load. */
const SYNC_DEADLINE_MS = 30_000;

/** Whether `promise` has settled, after every task queued so far has run. */
export async function hasSettled(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(() => settled = true, () => settled = true);
  await new Promise((resolve) => setTimeout(resolve, 0));
  return settled;
}
