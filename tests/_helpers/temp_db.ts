/** A temporary SQLite database file in a directory of its own, removed after the test. */
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite_store.ts";

/** A temporary SQLite database file in a directory of its own; see {@link tempDbPath}. */
export interface TempDb {
  path: string;
  dir: string;
  /** Removes the directory and everything in it. */
  cleanup(): void;
  /**
   * Opens a store on the file for `use` (to seed or inspect it around the code under test),
   * and closes it afterwards, even when `use` throws.
   */
  withStore<T>(use: (store: SqliteStore) => Promise<T>): Promise<T>;
  /** `using db = tempDbPath()` removes the directory at the end of the test. */
  [Symbol.dispose](): void;
}

/** Opens a SQLite store on `path` for `use`, and closes it afterwards, even when `use` throws. */
export async function withSqliteStore<T>(
  path: string,
  use: (store: SqliteStore) => Promise<T>,
): Promise<T> {
  const store = openSqliteStore(path);
  try {
    return await use(store);
  } finally {
    await store.closeStore();
  }
}

/** A temporary database path (nothing is created until something opens it). */
export function tempDbPath(): TempDb {
  const dir = Deno.makeTempDirSync({ prefix: "keygate-test-" });
  const path = `${dir}/keygate.sqlite3`;
  const cleanup = () => Deno.removeSync(dir, { recursive: true });
  return {
    path,
    dir,
    cleanup,
    withStore: (use) => withSqliteStore(path, use),
    [Symbol.dispose]: cleanup,
  };
}
