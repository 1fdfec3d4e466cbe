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
  type PostgresDiagnostics,
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

/**
 * What a backend offers: the {@link Store} every backend implements, and beside it what only
 * one backend has. A caller asks for a feature by name (`opened.maintenance`), never by
 * inspecting the store.
 */
export interface OpenedStore {
  store: Store;
  /** SQLite's own operations (backup, integrity check, WAL checkpoint); SQLite only. */
  maintenance?: SqliteMaintenance;
  /** PostgreSQL's diagnostics and leases (metrics, the janitor's turn); PostgreSQL only. */
  postgres?: PostgresDiagnostics;
}

/** Opens the store at `location`, a text or one already parsed (see the module documentation). */
export async function openStore(
  location: string | StoreLocation,
  options: OpenStoreOptions = {},
): Promise<OpenedStore> {
  const parsed = typeof location === "string" ? parseStoreLocation(location) : location;
  const { onMigrationWarning } = options;
  if (parsed.kind === "postgres") {
    const store = await openPostgresStore(parsed, { onMigrationWarning, ...options.postgres });
    return { store, postgres: store };
  }
  const store = openSqliteStore(parsed.path, { onMigrationWarning, ...options.sqlite });
  return { store, maintenance: store.sqlite };
}
