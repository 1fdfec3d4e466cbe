/**
 * The grant caches' secondary indexes (grant_cache.ts): for each token, API key and user id,
 * the cache keys of the entries that depend on it, so that a change scoped to one of them
 * evicts exactly those entries.
 *
 * @module
 */

/** The grants an entry depends on: its token (if any), its key and its user. */
export interface EntrySubjects {
  tokenId?: number;
  apiKeyId: number;
  userId: number;
}

/** A kind of subject a change can be scoped to (besides `all`). */
export type SubjectKind = "token" | "key" | "user";

/** Cache keys by the token, key and user their entries depend on. */
export interface SubjectIndex {
  add(key: string, subjects: EntrySubjects): void;
  delete(key: string, subjects: EntrySubjects): void;
  /** The keys of the entries that depend on this subject (a copy: free to evict while read). */
  keysOf(kind: SubjectKind, id: number): string[];
  clear(): void;
}

/** Creates an empty {@link SubjectIndex}. */
export function createSubjectIndex(): SubjectIndex {
  const indexes: Record<SubjectKind, Map<number, Set<string>>> = {
    token: new Map(),
    key: new Map(),
    user: new Map(),
  };

  function addOne(kind: SubjectKind, id: number | undefined, key: string): void {
    if (id === undefined) return;
    let keys = indexes[kind].get(id);
    if (keys === undefined) indexes[kind].set(id, keys = new Set());
    keys.add(key);
  }

  function deleteOne(kind: SubjectKind, id: number | undefined, key: string): void {
    if (id === undefined) return;
    const keys = indexes[kind].get(id);
    if (keys === undefined) return;
    keys.delete(key);
    if (keys.size === 0) indexes[kind].delete(id);
  }

  return {
    add(key, subjects) {
      addOne("token", subjects.tokenId, key);
      addOne("key", subjects.apiKeyId, key);
      addOne("user", subjects.userId, key);
    },
    delete(key, subjects) {
      deleteOne("token", subjects.tokenId, key);
      deleteOne("key", subjects.apiKeyId, key);
      deleteOne("user", subjects.userId, key);
    },
    keysOf(kind, id) {
      const keys = indexes[kind].get(id);
      return keys === undefined ? [] : [...keys];
    },
    clear() {
      for (const map of Object.values(indexes)) map.clear();
    },
  };
}
