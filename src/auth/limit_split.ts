/**
 * A failed lease batch, split: when one store call for many keys fails for another reason than
 * an unreachable store, the limiter (limiter.ts) leases the batch again in halves
 * ({@link splitFailed}) so that one key's failure does not fail the others, within a bounded
 * number of store calls ({@link toSplitBudget}).
 *
 * @module
 */

/** Whether two errors are alike (same kind, same message): a failure of the whole batch. */
function isAlike(a: unknown, b: unknown): boolean {
  return a instanceof Error && b instanceof Error && a.constructor === b.constructor &&
    a.message === b.message;
}

/** A batch's store call, tried by {@link splitFailed}: its outcomes, or what failed it. */
interface Tried {
  outcomes?: unknown[];
  error?: unknown;
}

/**
 * The store calls {@link splitFailed} may make for a batch of `size`: 4 log2 N + 3, enough to
 * find two failing keys (about 4 log2 N - 1 calls), far fewer than 2N - 1 for a large batch.
 */
export function toSplitBudget(size: number): number {
  return 4 * Math.ceil(Math.log2(Math.max(2, size))) + 3;
}

/**
 * The outcomes of a batch whose store call (`call`, which throws what fails the whole call)
 * failed with `error`, so that one key's failure does not fail the others: the batch is leased
 * again in halves, and a half that fails in halves again, down to the failing key (about
 * 2 log2 N calls for one failing key among N). When both halves fail alike, one key is tried
 * alone: failing alike too, it is a failure of the whole batch and every key gets it (4 calls,
 * where key by key took one per key); served, the halves are split further (two keys failing
 * alike, one in each half, fail only themselves, unless the one tried alone is one of them).
 * At most {@link toSplitBudget} calls in all (errors whose message varies would otherwise cost
 * up to 2N - 1 calls, one after the other): the keys not yet served then get their part's error.
 */
export async function splitFailed<T>(
  items: readonly T[],
  error: unknown,
  call: (batch: T[]) => Promise<unknown[]>,
  budget = { left: toSplitBudget(items.length) },
): Promise<unknown[]> {
  if (items.length <= 1 || budget.left <= 0) return items.map(() => error);
  async function attempt(batch: T[]): Promise<Tried> {
    if (budget.left <= 0) return { error };
    budget.left--;
    try {
      return { outcomes: await call(batch) };
    } catch (failed) {
      return { error: failed ?? new Error("A lease failed") };
    }
  }
  const half = Math.ceil(items.length / 2);
  const halves = [items.slice(0, half), items.slice(half)];
  const tries: Tried[] = [];
  for (const batch of halves) tries.push(await attempt(batch));
  const failedAlike = (tried: Tried) => tried.outcomes === undefined && isAlike(tried.error, error);
  if (tries.every(failedAlike) && halves[0].length > 1) {
    const probe = await attempt([items[0]]);
    if (failedAlike(probe)) return items.map(() => error);
    return [
      probe.outcomes?.[0] ?? probe.error,
      ...await splitFailed(halves[0].slice(1), error, call, budget),
      ...await splitFailed(halves[1], tries[1].error, call, budget),
    ];
  }
  const outcomes: unknown[] = [];
  for (let i = 0; i < halves.length; i++) {
    const tried = tries[i];
    outcomes.push(...(tried.outcomes ?? await splitFailed(halves[i], tried.error, call, budget)));
  }
  return outcomes;
}
