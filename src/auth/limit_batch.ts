/**
 * Coalesces a limiter's leases: the keys that need units while a lease is under way, or within
 * the same turn of the event loop, are leased together in one store call (`Store.leaseLimits`
 * takes many keys: one transaction, a few statements, for all of them). So a thread that serves
 * many sparse keys pays one transaction per batch, not one per key, and the batches grow with
 * the load: at most one store call is under way per thread, and the keys that ask meanwhile go
 * in the next one.
 *
 * A quiet thread leases at once (the first key waits only for the next turn of the event loop,
 * where the other keys of the same burst join it), but for leases no request waits for (leases
 * ahead), which gather for up to {@link GATHER_MS} first. Nothing here is about counting: the
 * store's transaction keeps the sum of a window's grants within its limit whatever a batch holds.
 *
 * @module
 */

/** The most keys one store call leases for (the rest wait for the next call). */
export const MAX_BATCH = 256;

/**
 * A batch of background items only runs once the oldest of them has waited this long for more to
 * join it (or a batch's worth is queued). Leases ahead come due a few at a time through a window's
 * last seconds (limit_ahead.ts), and a store call that answers at once (SQLite's) would otherwise
 * take them a few keys a call: a write transaction each. Their margin is at least a quarter second
 * (a per-second window's quarter), so this leaves the call more than half of it; an item a request
 * waits for never waits for it, and takes the gathered ones along.
 */
export const GATHER_MS = 100;

/**
 * Runs one batch; resolves to each item's outcome, in order: `undefined` when it was served,
 * else the error its waiters get.
 */
export type BatchRun<T> = (items: T[]) => Promise<unknown[]>;

/** A lease coalescer. */
export interface LeaseBatcher<T> {
  /**
   * Queues `item` for the next batch; settles when its batch has run (rejects with its error).
   * A `background` item (a lease ahead: no request waits for it before its boundary) only fills
   * the room the other items leave in a batch, and a batch of them only waits {@link GATHER_MS}
   * for more.
   */
  lease(item: T, options?: { background?: boolean }): Promise<void>;
  /**
   * Runs the background items gathering now at the next turn of the event loop, without waiting
   * out {@link GATHER_MS} (a limiter's stop: no lease ahead is asked after it). Those asked later
   * gather as before.
   */
  flushGathering(): void;
  /** Batches run so far (metrics and tests). */
  readBatches(): number;
}

/** What {@link createLeaseBatcher} may be told. */
export interface LeaseBatcherOptions<T> {
  /** Whether a queued item has nothing left to do: it settles without a batch. */
  isOver?(item: T): boolean;
  /** The most items one batch runs (default {@link MAX_BATCH}). */
  maxBatch?: number;
  /** How long a batch of background items only waits for more (default {@link GATHER_MS}). */
  gatherMs?: number;
}

interface Waiter<T> {
  item: T;
  resolve(): void;
  reject(error: unknown): void;
  /** When it was queued (`performance.now()`): background items gather from the oldest's. */
  queuedAt: number;
}

/**
 * Creates a coalescer that runs batches with `run`, one at a time: the foreground items first, in
 * the order they came, then background ones in the room left.
 */
export function createLeaseBatcher<T>(
  run: BatchRun<T>,
  options: LeaseBatcherOptions<T> = {},
): LeaseBatcher<T> {
  const maxBatch = options.maxBatch ?? MAX_BATCH;
  const gatherMs = options.gatherMs ?? GATHER_MS;
  let queue: Waiter<T>[] = [];
  let background: Waiter<T>[] = [];
  let running = false;
  /** The next batch's timer, and whether it gathers (background items only). */
  let scheduled: { timer: ReturnType<typeof setTimeout>; gathering: boolean } | undefined;
  let batches = 0;
  /** The background items queued do not gather (`flushGathering`) until none is left. */
  let hurry = false;

  /**
   * Schedules the next batch unless one runs: at the next turn of the event loop when an item a
   * request waits for is queued, or a batch's worth of background items (sooner than a gathering
   * timer) or the background items were told not to gather (`hurry`), else once the oldest
   * background item has waited {@link GATHER_MS}.
   */
  function schedule(): void {
    if (running) return;
    const gathering = !hurry && queue.length === 0 && background.length < maxBatch;
    if (scheduled !== undefined && (gathering || !scheduled.gathering)) return;
    if (scheduled !== undefined) clearTimeout(scheduled.timer);
    const delay = gathering
      ? Math.max(0, background[0].queuedAt + gatherMs - performance.now())
      : 0;
    scheduled = { timer: setTimeout(() => void flush(), delay), gathering };
  }

  /** The queued items still to do; those over are settled. */
  function dropOver(waiters: Waiter<T>[]): Waiter<T>[] {
    const { isOver } = options;
    if (isOver === undefined) return waiters;
    return waiters.filter((waiter) => {
      if (!isOver(waiter.item)) return true;
      waiter.resolve();
      return false;
    });
  }

  /** The next batch: the foreground items first, then the background ones, those over dropped. */
  function takeBatch(): Waiter<T>[] {
    queue = dropOver(queue);
    const batch = queue.slice(0, maxBatch);
    queue = queue.slice(batch.length);
    background = dropOver(background);
    const room = maxBatch - batch.length;
    batch.push(...background.slice(0, room));
    background = background.slice(Math.min(room, background.length));
    return batch;
  }

  async function flush(): Promise<void> {
    scheduled = undefined;
    if (running) return;
    const batch = takeBatch();
    // Those hurried are all taken: the background items asked from now on gather again.
    if (background.length === 0) hurry = false;
    if (batch.length === 0) return;
    running = true;
    batches++;
    try {
      let outcomes: unknown[];
      try {
        outcomes = await run(batch.map((waiter) => waiter.item));
      } catch (error) {
        outcomes = batch.map(() => error ?? new Error("A lease failed"));
      }
      batch.forEach((waiter, i) => {
        if (outcomes[i] === undefined) waiter.resolve();
        else waiter.reject(outcomes[i]);
      });
    } finally {
      running = false;
      // The keys that asked meanwhile go at once, together (background ones once the oldest has
      // gathered long enough, counted from when it was queued).
      if (queue.length > 0) void flush();
      else if (background.length > 0) schedule();
    }
  }

  return {
    lease(item, leaseOptions) {
      const settled = new Promise<void>((resolve, reject) => {
        const waiter = { item, resolve, reject, queuedAt: performance.now() };
        (leaseOptions?.background ? background : queue).push(waiter);
      });
      schedule();
      return settled;
    },
    flushGathering() {
      if (background.length === 0) return;
      // While a batch runs, its end takes them at once (schedule() then finds them hurried).
      hurry = true;
      schedule();
    },
    readBatches: () => batches,
  };
}
