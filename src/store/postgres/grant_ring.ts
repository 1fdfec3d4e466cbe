/**
 * The ring of scopes the PostgreSQL stores of one process share (`--workers`), so that a sibling
 * worker's revocation is evicted on the very next request (grant_epoch.ts describes the protocol).
 *
 * @module
 */
import { ALL } from "../grant_change_log.ts";
import type { GrantScope } from "../store_types.ts";

/** Entries of a {@link SharedGrantCounter}'s ring. */
export const RING_ENTRIES = 1024;

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

/** One scope in the ring, at the database position that committed it. */
export interface RingEntry {
  scope: GrantScope;
  position: number;
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
function readEntry(ring: SharedGrantCounter, sequence: number): RingEntry | undefined {
  const slot = slotOf(sequence);
  if (Atomics.load(ring.after, slot) !== sequence) return undefined;
  const kind = KINDS[ring.kinds[slot]];
  const id = ring.subjects[slot];
  const position = ring.positions[slot];
  if (Atomics.load(ring.before, slot) !== sequence || kind === undefined) return undefined;
  return { scope: kind === "all" ? ALL : { kind, id }, position };
}

/**
 * The entries after sequence `seen` up to `head`, in order. `complete` is false when one could
 * not be read (being written, or overwritten: the reader fell behind), or the gap is wider than
 * the ring: the reader must then learn `all` after the entries returned.
 */
export function readRingSince(
  ring: SharedGrantCounter,
  seen: number,
  head: number,
): { entries: RingEntry[]; complete: boolean } {
  const behind = (head - seen) | 0;
  if (behind < 0 || behind > RING_ENTRIES) return { entries: [], complete: false };
  const entries: RingEntry[] = [];
  for (let i = 1; i <= behind; i++) {
    const entry = readEntry(ring, (seen + i) | 0);
    if (entry === undefined) return { entries, complete: false };
    entries.push(entry);
  }
  return { entries, complete: true };
}

/**
 * Appends a store's own committed `scopes` (at `position`) and returns the sequence the store has
 * now seen: past its own entries when no other store's came in between (they are learned
 * already), else `seen` unchanged, so the next read learns ours again with them (an eviction
 * repeated, nothing missed).
 */
export function appendOwn(
  ring: SharedGrantCounter,
  scopes: readonly GrantScope[],
  position: number,
  seen: number,
): number {
  const expected = (Atomics.load(ring.head, 0) + scopes.length) | 0;
  const caughtUp = Atomics.load(ring.head, 0) === seen;
  for (const scope of scopes) publish(ring, scope, position);
  return caughtUp && Atomics.load(ring.head, 0) === expected ? expected : seen;
}
