/**
 * How the server opens its store: the main thread and every request worker
 * (`--workers`) open it through this one function, so that they always use
 * the same database, backend and options; {@link openServingStore} hands it
 * over as a part of the server's lifecycle, closed (and checkpointed) when
 * disposed.
 *
 * @module
 */
import { StartupError } from "../config/errors.ts";
import { explainDatabaseError } from "../config/preflight.ts";
import type { Config } from "../config/settings.ts";
import { explainPostgresOpenError } from "../store/postgres/explain_open.ts";
import type { Logger } from "../platform/logger.ts";
import { type OpenedStore, openStore, type OpenStoreOptions } from "../store/open_store.ts";
import type { PostgresStoreOptions } from "../store/postgres/open_postgres_store.ts";
import type { SharedGrantCounter } from "../store/postgres/open_postgres_store.ts";
export {
  createSharedGrantCounter,
  type SharedGrantCounter,
} from "../store/postgres/open_postgres_store.ts";
import { parseStoreUrl, type StoreLocation } from "../store/store_url.ts";
import type { WalSyncRunner } from "../store/sqlite/wal_sync.ts";

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
  & Pick<
    PostgresStoreOptions,
    "onListenerChange" | "onOperation" | "onChangeDelay" | "sharedGrantCounter"
  >
  & Pick<OpenStoreOptions, "onMigrationWarning">
  & {
    /**
     * Hears, once, a store condition that needs a restart: a failed WAL sync on SQLite
     * (src/server/fatal_stop.ts).
     */
    onFatal?(reason: string): void;
    /** Runs SQLite's WAL syncs (tests; see `SqliteStoreOptions.runWalSync`). */
    runWalSync?: WalSyncRunner;
  };

/** Opens the configured store for serving requests. */
export function openServerStore(
  config: Config,
  hooks: ServerStoreHooks = {},
): Promise<OpenedStore> {
  const { onMigrationWarning, onFatal, runWalSync, ...postgresHooks } = hooks;
  // Logins need no fsync on the thread that serves secure requests; revocations still get one.
  return openStore(toStoreLocation(config), {
    sqlite: { durability: "grants", onWalSyncFailure: onFatal, runWalSync },
    postgres: {
      durability: "grants",
      stalenessMs: config.storeStalenessSeconds * 1000,
      notifications: config.storeListen,
      ...postgresHooks,
    },
    onMigrationWarning,
  });
}

/** The store, and what its backend offers, as a part of the server's lifecycle: disposing it closes it. */
export interface ServingStore extends OpenedStore, AsyncDisposable {}

/** How {@link openServingStore}'s store closes. */
export interface ClosingOptions {
  logger: Logger;
  /**
   * Checkpoint a SQLite store's WAL into the database before closing (the main thread, which
   * closes last; request workers leave it to it).
   */
  checkpoint?: boolean;
}

/** Opens the configured store ({@link openServerStore}) as a {@link ServingStore}. */
export async function openServingStore(
  config: Config,
  hooks: ServerStoreHooks,
  closing: ClosingOptions,
): Promise<ServingStore> {
  const opened = await openServerStore(config, hooks);
  const { store, maintenance } = opened;
  return {
    ...opened,
    async [Symbol.asyncDispose]() {
      if (closing.checkpoint) {
        try {
          maintenance?.checkpointWal();
        } catch (error) {
          closing.logger.warn("checkpoint failed", { error: String(error) });
        }
      }
      await store.closeStore();
    },
  };
}

/** What the main thread's store reports to. */
export interface MainStoreOptions {
  logger: Logger;
  /** PostgreSQL's query timings. */
  onOperation?: ServerStoreHooks["onOperation"];
  /** PostgreSQL's commit-to-learned delays of other instances' changes. */
  onChangeDelay?: ServerStoreHooks["onChangeDelay"];
  sharedGrantCounter?: SharedGrantCounter;
  /** Hears a store condition that needs a restart (see {@link ServerStoreHooks}). */
  onFatal?(reason: string): void;
  /** Runs SQLite's WAL syncs (tests; see `SqliteStoreOptions.runWalSync`). */
  runWalSync?: WalSyncRunner;
}

/**
 * Opens the main thread's store (the admin API, the janitor, and the API without --workers),
 * checkpointed and closed when disposed; a failure to open is one {@link StartupError} line,
 * never with a password.
 */
export async function openMainStore(
  config: Config,
  env: Record<string, string | undefined>,
  options: MainStoreOptions,
): Promise<ServingStore> {
  const { logger } = options;
  const location = toStoreLocation(config);
  try {
    return await openServingStore(config, {
      sharedGrantCounter: options.sharedGrantCounter,
      onFatal: options.onFatal,
      runWalSync: options.runWalSync,
      onOperation: options.onOperation,
      onChangeDelay: options.onChangeDelay,
      onMigrationWarning: (line) => logger.warn(line, { event: "store_migration" }),
      onListenerChange: (listening) =>
        logger[listening ? "info" : "warn"](
          listening
            ? "listening for revocations"
            : "revocation listener lost: polling until it is back",
          { event: "store_listener", db: location.display },
        ),
    }, { logger, checkpoint: true });
  } catch (error) {
    if (location.kind === "sqlite") throw explainDatabaseError(error, location.path);
    // One line, never the password: the URL redacted, the driver's reason and a hint after it.
    throw new StartupError(
      `Cannot open the store ${location.display}: ${
        explainPostgresOpenError(error, location, env)
      }`,
      1,
    );
  }
}
