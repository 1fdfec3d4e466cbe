/**
 * Opens the PostgreSQL store: connects, applies pending migrations (safe
 * when N instances start at once), starts watching the grant epoch, and
 * composes the method groups (one file each, named as in src/store/sqlite/)
 * into one {@link Store}, with PostgreSQL's own diagnostics beside it.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreUnavailable } from "../errors.ts";
import type { Store } from "../store.ts";
import { parseStoreUrl, type PostgresLocation } from "../store_url.ts";
import { createAdminViewStore } from "./admin_views.ts";
import { createApiKeyStore } from "./api_keys.ts";
import { createAuditStore } from "./audit.ts";
import { openPostgresClient } from "./connect.ts";
import { createPgContext, type OperationObserver } from "./db.ts";
import { createGrantFeedStore } from "./grant_feed.ts";
import { createLimitStore } from "./limits.ts";
import {
  createGrantEpochWatcher,
  createSharedGrantCounter,
  DEFAULT_POLL_MS,
  DEFAULT_STALENESS_MS,
  type GrantEpochStats,
  type GrantEpochWatcher,
  type SharedGrantCounter,
} from "./grant_epoch.ts";
import { claimLease, releaseLease } from "./leases.ts";
import { createLifecycleStore } from "./lifecycle.ts";
import { createLoginFailureStore } from "./login_failures.ts";
import { createPortalStore } from "./portal.ts";
import { migratePostgres, readSchemaVersion, SchemaTooNew } from "./migrate.ts";
import { createRetentionStore } from "./retention.ts";
import { POSTGRES_MIGRATIONS } from "./schema.ts";
import { createTokenStore } from "./tokens.ts";
import { createUserStore } from "./users.ts";

/** Options for {@link openPostgresStore}. */
export interface PostgresStoreOptions {
  /** Connections in the pool (the listener has one more of its own). Default 10. */
  maxConnections?: number;
  /** Interval between polls of the grant epoch. Default 500 ms. */
  pollMs?: number;
  /** After this long without confirming the grant epoch, the secure path fails closed. Default 2 s. */
  stalenessMs?: number;
  /**
   * `"full"` (the default): every commit waits for PostgreSQL's WAL flush.
   * `"grants"` (the server): only commits that can end a grant do; a new
   * token, a key's last use and throttle counters commit with
   * `synchronous_commit = off`, so a crash of the database server (not of
   * keygate) can lose the last fraction of a second of them.
   */
  durability?: "full" | "grants";
  /**
   * LISTEN/NOTIFY for fast revocation (default true). False for an engine
   * without them (a proxy that does not pass LISTEN): the poll alone then bounds the delay.
   */
  notifications?: boolean;
  /**
   * Positions of the grant change record kept (default 10,000, each one grant-ending write):
   * an instance that has not polled since more were written drops its caches.
   */
  changeRecordPositions?: number;
  /** Apply pending migrations (default true); when false, refuse any schema but the newest. */
  migrate?: boolean;
  /** Hears the one-line warnings of the migrations this opening applies (never addresses). */
  onMigrationWarning?(line: string): void;
  /** Shown in `pg_stat_activity`. Default `"keygate"`. */
  applicationName?: string;
  /** Told when the listener connection comes up or goes down, for the log. */
  onListenerChange?: (listening: boolean, error?: unknown) => void;
  /** Told of every read and write that ended, for the query-latency metric. */
  onOperation?: OperationObserver;
  /**
   * Told, in milliseconds, how long each change another instance notified took from its commit
   * (the database's clock) to this store having learned it, for the change-delay metric.
   */
  onChangeDelay?: (ms: number) => void;
  /**
   * The ring of committed scopes this process's stores share (`--workers N`: the main
   * thread's and every request worker's; see {@link createSharedGrantCounter}). Each
   * grant-ending write appends its scopes after its commit, before it resolves, and every
   * sharing store's `readGrantEpoch()` learns them: a revocation through one worker is then
   * refused by every worker on the next request, notifications or not. Without it, a sibling
   * store learns of the write by notification or poll, like another process.
   */
  sharedGrantCounter?: SharedGrantCounter;
  /**
   * How long opening waits for the server's first answer once connected (TLS, authentication,
   * one query). Default 10 s.
   */
  firstAnswerTimeoutMs?: number;
}

export { createSharedGrantCounter, type SharedGrantCounter };

/** What {@link PostgresStore.readPostgresStats} reports, for metrics. */
export interface PostgresStats extends GrantEpochStats {
  /** Reads and writes under way (each holds at most one pooled connection). */
  operationsInFlight: number;
  /** The pool's size. */
  maxConnections: number;
}

/** What only the PostgreSQL backend offers, beside the contract (see `openStore`). */
export interface PostgresDiagnostics {
  readonly backend: "postgres";
  /** Where it is connected, password redacted. */
  readonly display: string;
  /** The grant-epoch watcher's counters (notifications, lag, listener state). */
  readGrantEpochStats(): GrantEpochStats;
  /** The watcher's counters and the pool's use, for metrics. */
  readPostgresStats(): PostgresStats;
  /**
   * Reads the grant epoch now instead of waiting for a notification or the
   * next poll: after another process (the admin CLI) wrote, the next
   * `readGrantEpoch()` reflects it.
   */
  refreshGrantEpoch(): Promise<void>;
  /**
   * Takes or renews a lease (a duty one instance at a time performs, such
   * as the janitor's sweeps) until `now + ttlMs`; resolves to whether this
   * holder has it.
   */
  claimLease(lease: { name: string; holder: string; now: number; ttlMs: number }): Promise<boolean>;
  /** Gives a lease up, if held by `holder`. */
  releaseLease(lease: { name: string; holder: string }): Promise<void>;
}

/** The PostgreSQL store, with its own diagnostics. */
export interface PostgresStore extends Store, PostgresDiagnostics {}

/** How long opening waits for the first read of the grant epoch. */
const OPEN_TIMEOUT_MS = 10_000;

/**
 * How long opening waits for the server's first answer (TLS, authentication, one query) once
 * connected: a port that accepts connections but never speaks PostgreSQL must not hang a start.
 * (Migrations come after, and may wait longer for another instance's.)
 */
const FIRST_ANSWER_TIMEOUT_MS = 10_000;

/**
 * Opens a PostgreSQL store at a `postgres://` URL (or a parsed location).
 * Rejects with {@link SchemaTooNew} against a schema newer than this keygate.
 */
export async function openPostgresStore(
  target: string | PostgresLocation,
  options: PostgresStoreOptions = {},
): Promise<PostgresStore> {
  const location = typeof target === "string" ? parseStoreUrl(target) : target;
  if (location.kind !== "postgres") {
    throw new TypeError(`Not a PostgreSQL URL: "${location.display}"`);
  }
  const applicationName = options.applicationName ?? "keygate";
  const maxConnections = options.maxConnections ?? 10;
  const sql = openPostgresClient(location, { max: maxConnections, applicationName });
  let watcher: GrantEpochWatcher;
  try {
    await firstAnswer(sql, location, options.firstAnswerTimeoutMs ?? FIRST_ANSWER_TIMEOUT_MS);
    await prepareSchema(sql, options);
    watcher = await startWatcher(sql, location, { ...options, applicationName });
  } catch (error) {
    await sql.end({ timeout: 0 });
    throw error;
  }
  return composeStore({ sql, watcher, location, options, maxConnections });
}

/** Applies pending migrations, or (with `migrate: false`) refuses any schema but the newest. */
async function prepareSchema(sql: postgres.Sql, options: PostgresStoreOptions): Promise<void> {
  if (options.migrate ?? true) {
    const { warnings } = await migratePostgres(sql);
    for (const line of warnings) options.onMigrationWarning?.(line);
    return;
  }
  const version = await readSchemaVersion(sql);
  if (version > POSTGRES_MIGRATIONS.length) {
    throw new SchemaTooNew(
      `Database schema version ${version} is newer than this keygate knows (${POSTGRES_MIGRATIONS.length}): upgrade keygate`,
    );
  }
  if (version < POSTGRES_MIGRATIONS.length) {
    throw new Error(
      `Database schema version ${version} is older than this keygate's (${POSTGRES_MIGRATIONS.length}): run "deno task admin db migrate"`,
    );
  }
}

/**
 * Starts the grant-epoch watcher (with its own listener connection unless notifications are
 * off) and waits for its first confirmed read; closes it again if that does not come.
 */
async function startWatcher(
  sql: postgres.Sql,
  location: PostgresLocation,
  options: PostgresStoreOptions & { applicationName: string },
): Promise<GrantEpochWatcher> {
  const watcher = createGrantEpochWatcher({
    sql,
    pollMs: options.pollMs ?? DEFAULT_POLL_MS,
    stalenessMs: options.stalenessMs ?? DEFAULT_STALENESS_MS,
    openListener: (options.notifications ?? true)
      ? (hooks) =>
        openPostgresClient(location, {
          max: 1,
          applicationName: `${options.applicationName}-listener`,
          maxLifetimeSeconds: null,
          ...hooks,
        })
      : undefined,
    onListenerChange: options.onListenerChange,
    sharedCounter: options.sharedGrantCounter,
    onChangeDelay: options.onChangeDelay,
  });
  let readyTimer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      watcher.ready(),
      new Promise<never>((_, reject) =>
        readyTimer = setTimeout(
          () => reject(new StoreUnavailable("Cannot read the grant epoch: database unreachable")),
          OPEN_TIMEOUT_MS,
        )
      ),
    ]);
  } catch (error) {
    await watcher.close();
    throw error;
  } finally {
    clearTimeout(readyTimer);
  }
  return watcher;
}

/** The method groups over one pool and watcher, and the diagnostics beside them. */
function composeStore(parts: {
  sql: postgres.Sql;
  watcher: GrantEpochWatcher;
  location: PostgresLocation;
  options: PostgresStoreOptions;
  maxConnections: number;
}): PostgresStore {
  const { sql, watcher, options, maxConnections } = parts;
  const closing = { closed: false };
  const db = createPgContext({
    sql,
    watcher,
    notify: options.notifications ?? true,
    durability: options.durability ?? "full",
    recordPositions: options.changeRecordPositions,
    isClosed: () => closing.closed,
    onOperation: options.onOperation,
  });
  return {
    backend: "postgres",
    display: parts.location.display,
    readGrantEpochStats: () => watcher.stats(),
    refreshGrantEpoch: () => watcher.refresh(),
    readPostgresStats: () => ({
      ...watcher.stats(),
      operationsInFlight: db.readInFlight(),
      maxConnections,
    }),
    claimLease: (lease) => claimLease(db, lease),
    releaseLease: (lease) => releaseLease(db, lease),

    ...createLifecycleStore({ sql, db, watcher, closing }),
    ...createUserStore(db),
    ...createApiKeyStore(db),
    ...createTokenStore(db, { isEpochConfirmed: () => watcher.read() !== undefined }),
    ...createGrantFeedStore(watcher),
    ...createLoginFailureStore(db),
    ...createAuditStore(db),
    ...createRetentionStore(db),
    ...createAdminViewStore(db),
    ...createPortalStore(db),
    ...createLimitStore(db),
  };
}

/** One round trip, within `timeoutMs`; the driver's error passes through. */
async function firstAnswer(
  sql: postgres.Sql,
  location: PostgresLocation,
  timeoutMs: number,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const query = sql`SELECT 1 AS ok`.then(() => {});
  query.catch(() => {}); // may lose the race below: never an unhandled rejection
  try {
    await Promise.race([
      query,
      new Promise<never>((_, reject) =>
        timer = setTimeout(
          () =>
            reject(
              new StoreUnavailable(
                `No answer from ${location.host}:${location.port} within ${
                  timeoutMs / 1000
                } s of connecting: check that a PostgreSQL server listens there`,
              ),
            ),
          timeoutMs,
        )
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
