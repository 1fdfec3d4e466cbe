/**
 * How the server opens its store: the main thread and every request worker
 * (`--workers`) open it through this one function, so that they always use
 * the same database, backend and options.
 *
 * @module
 */
import type { Config } from "../config/settings.ts";
import { openStore, type OpenStoreOptions } from "../store/open_store.ts";
import type { PostgresStoreOptions } from "../store/postgres/open_postgres_store.ts";
export {
  createSharedGrantCounter,
  type SharedGrantCounter,
} from "../store/postgres/open_postgres_store.ts";
import type { Store } from "../store/store.ts";
import { parseStoreUrl, type StoreLocation } from "../store/store_url.ts";

/** `--store` (a `postgres://` URL, `sqlite:PATH` or a path), or else the SQLite file of `--db`. */
export function toStoreLocation(config: Config): StoreLocation {
  return config.store === undefined
    ? { kind: "sqlite", path: config.dbPath, display: config.dbPath }
    : parseStoreUrl(config.store);
}

/**
 * What the caller wants to hear from the store (the log, the metrics), and the grant counter
 * the stores of one process share (`--workers`: created by the main thread, handed to every
 * request worker; SQLite's WAL index already does this job and ignores it).
 */
export type ServerStoreHooks =
  & Pick<PostgresStoreOptions, "onListenerChange" | "onOperation" | "sharedGrantCounter">
  & Pick<OpenStoreOptions, "onMigrationWarning">;

/** Opens the configured store for serving requests. */
export function openServerStore(config: Config, hooks: ServerStoreHooks = {}): Promise<Store> {
  const { onMigrationWarning, ...postgresHooks } = hooks;
  // Logins need no fsync on the thread that serves secure requests; revocations still get one.
  return openStore(toStoreLocation(config), {
    sqlite: { durability: "grants" },
    postgres: {
      durability: "grants",
      stalenessMs: config.storeStalenessSeconds * 1000,
      notifications: config.storeListen,
      ...postgresHooks,
    },
    onMigrationWarning,
  });
}
