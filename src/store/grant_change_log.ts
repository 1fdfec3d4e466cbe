/**
 * One store's memory of the grant changes it has learned (from the database's change record,
 * from its own commits, from sibling workers), as a bounded log of scopes numbered by a local
 * position ({@link GrantEpoch}). Each cache keeps the position it has applied and asks for the
 * scopes since; one that fell further behind than the log keeps gets `undefined` and drops
 * everything. Both backends use it; only how they learn differs.
 *
 * @module
 */
import type { GrantEpoch, GrantInvalidations, GrantScope, GrantScopeKind } from "./store_types.ts";

/** Scopes kept in memory for caches that have not caught up yet. */
export const GRANT_LOG_CAPACITY = 4096;

/** A store's log of learned scopes. */
export interface GrantChangeLog {
  /** The local position: how many scopes were learned. */
  position(): GrantEpoch;
  /** Learns one scope. */
  push(scope: GrantScope): void;
  /** See `Store.readGrantChanges`. */
  since(from: GrantEpoch): readonly GrantScope[] | undefined;
  /** Scopes learned, by kind. */
  counts(): GrantInvalidations;
}

/** The one scope that drops everything. */
export const ALL: GrantScope = Object.freeze({ kind: "all" });

const NONE: readonly GrantScope[] = Object.freeze([]);

/** A new, empty log. */
export function createGrantChangeLog(capacity = GRANT_LOG_CAPACITY): GrantChangeLog {
  const ring: GrantScope[] = new Array(capacity);
  let position = 0;
  const counts: GrantInvalidations = { token: 0, key: 0, user: 0, all: 0 };
  return {
    position: () => position,
    push(scope) {
      position++;
      ring[position % capacity] = scope;
      counts[scope.kind]++;
    },
    since(from) {
      if (from === position) return NONE;
      if (!(from < position) || position - from > capacity) return undefined;
      const scopes: GrantScope[] = [];
      for (let at = from + 1; at <= position; at++) scopes.push(ring[at % capacity]);
      return scopes;
    },
    counts: () => ({ ...counts }),
  };
}

/** Whether `kind` names a scope with a subject id. */
export function isSubjectKind(kind: string): kind is Exclude<GrantScopeKind, "all"> {
  return kind === "token" || kind === "key" || kind === "user";
}

/**
 * A scope from a change record's row; anything unreadable (a hand-made row) is `all`, so what
 * cannot be accounted for drops everything.
 */
export function toGrantScope(kind: unknown, subject: unknown): GrantScope {
  const id = typeof subject === "string" ? Number(subject) : subject;
  if (typeof kind === "string" && isSubjectKind(kind) && Number.isSafeInteger(id)) {
    return { kind, id: id as number };
  }
  return ALL;
}

/** Where a store stands in the database's change record: the position seen and its row's tag. */
export interface RecordCursor {
  readonly position: number;
  /** The random tag of the row(s) at `position`, `null` when there is none. */
  readonly tag: number | null;
}

/** One row of the change record. */
export interface RecordRow {
  position: number;
  scope: unknown;
  subject: unknown;
}

/** What a store read from the change record, in one snapshot of the database. */
export interface RecordRead {
  /** The record's newest position and its tag. */
  head: RecordCursor;
  /** The tag now at the cursor's position (`null`: no row there any more). */
  tagAtCursor: number | null;
  /** Rows after the cursor's position up to the head's, by position. */
  rows: readonly RecordRow[];
  /** Whether `rows` was cut short (the store is too far behind to read them all). */
  truncated: boolean;
}

/**
 * What a read of the change record means for a store at `cursor`: the scopes to learn (when
 * `exact`, one per row, in order) and the new cursor. Exact only when the record accounts for every position in between; otherwise
 * (the position went back or its row changed: a restored backup; a position without rows: a
 * hand-made bump of the epoch, or rows pruned before this store read them; too much to read)
 * the answer is {@link ALL}.
 */
export function toRecordedScopes(
  cursor: RecordCursor,
  read: RecordRead,
): { scopes: readonly GrantScope[]; cursor: RecordCursor; exact: boolean } {
  const { head } = read;
  if (head.position === cursor.position && read.tagAtCursor === cursor.tag) {
    return { scopes: NONE, cursor, exact: true };
  }
  const restored = head.position < cursor.position || read.tagAtCursor !== cursor.tag;
  if (restored || read.truncated) return { scopes: [ALL], cursor: head, exact: false };
  const scopes: GrantScope[] = [];
  let expected = cursor.position + 1;
  let complete = true;
  for (const row of read.rows) {
    if (row.position === expected) expected++;
    else if (row.position !== expected - 1) complete = false;
    scopes.push(toGrantScope(row.scope, row.subject));
  }
  if (!complete || expected !== head.position + 1) {
    return { scopes: [ALL], cursor: head, exact: false };
  }
  return { scopes, cursor: head, exact: true };
}
