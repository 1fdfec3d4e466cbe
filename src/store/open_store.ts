/**
 * Chooses and opens a store backend from a location (see store_url.ts):
 * `postgres://` or `postgresql://` opens PostgreSQL; `sqlite:PATH`, a plain
 * path, or `:memory:` opens SQLite. The composition root (`main.ts`) and the
 * admin CLI open their store here and nowhere else.
 *
 * @module
 */
import {
  openPostgresStore,
  type PostgresStore,
  type PostgresStoreOptions,
} from "./postgres/open_postgres_store.ts";
import type { SqliteMaintenance } from "./sqlite/maintenance.ts";
import { openSqliteStore, type SqliteStoreOptions } from "./sqlite/sqlite_store.ts";
import type { Store } from "./store.ts";
import { parseStoreUrl, type StoreLocation } from "./store_url.ts";

/** Options for {@link openStore}, per backend. */
export interface OpenStoreOptions {
  sqlite?: SqliteStoreOptions;
  postgres?: PostgresStoreOptions;
  /** Hears the one-line warnings of the migrations the opening applies, on either backend. */
  onMigrationWarning?(line: string): void;
}

/**
 * Which backend a location names, and its backend-specific part. Throws
 * `SyntaxError` for a malformed one (never showing a password).
 */
export function parseStoreLocation(location: string): StoreLocation {
  return parseStoreUrl(location);
}

/** Opens the store at `location`, a text or one already parsed (see the module documentation). */
export async function openStore(
  location: string | StoreLocation,
  options: OpenStoreOptions = {},
): Promise<Store> {
  const parsed = typeof location === "string" ? parseStoreLocation(location) : location;
  const { onMigrationWarning } = options;
  if (parsed.kind === "postgres") {
    return await openPostgresStore(parsed, { onMigrationWarning, ...options.postgres });
  }
  return openSqliteStore(parsed.path, { onMigrationWarning, ...options.sqlite });
}

/** The SQLite-only operations of a store, or `undefined` for another backend. */
export function findSqliteMaintenance(store: Store): SqliteMaintenance | undefined {
  return "sqlite" in store ? (store as { sqlite: SqliteMaintenance }).sqlite : undefined;
}

/** The PostgreSQL store's own diagnostics, or `undefined` for another backend. */
export function findPostgresStore(store: Store): PostgresStore | undefined {
  return (store as Partial<PostgresStore>).backend === "postgres"
    ? store as PostgresStore
    : undefined;
}
