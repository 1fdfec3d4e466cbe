/**
 * Chooses and opens a store backend from a location: `sqlite:PATH`, a plain
 * path, or `:memory:` opens SQLite. The composition root (`main.ts`) and the
 * admin CLI open their store here and nowhere else.
 *
 * @module
 */
import type { SqliteMaintenance } from "./sqlite/maintenance.ts";
import { openSqliteStore, type SqliteStoreOptions } from "./sqlite/sqlite_store.ts";
import type { Store } from "./store.ts";

/** Options for {@link openStore}, per backend. */
export interface OpenStoreOptions {
  sqlite?: SqliteStoreOptions;
}

/** Which backend a location names, and its backend-specific part. */
export function parseStoreLocation(location: string): { backend: "sqlite"; path: string } {
  if (/^postgres(ql)?:\/\//i.test(location)) {
    throw new TypeError("Cannot open the store: PostgreSQL is not supported by this build");
  }
  const path = location.startsWith("sqlite:") ? location.slice("sqlite:".length) : location;
  if (path === "") throw new TypeError("Cannot open the store: empty SQLite path");
  return { backend: "sqlite", path };
}

/** Opens the store at `location` (see the module documentation). */
// deno-lint-ignore require-await
export async function openStore(location: string, options: OpenStoreOptions = {}): Promise<Store> {
  const { path } = parseStoreLocation(location);
  return openSqliteStore(path, options.sqlite);
}

/** The SQLite-only operations of a store, or `undefined` for another backend. */
export function findSqliteMaintenance(store: Store): SqliteMaintenance | undefined {
  return "sqlite" in store ? (store as { sqlite: SqliteMaintenance }).sqlite : undefined;
}
