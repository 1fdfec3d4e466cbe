/**
 * The SQLite backend of the store contract (src/store/store.ts): one connection
 * (connection.ts) and one file per method group of the contract, composed here. The group
 * files have the same names in src/store/postgres/ (tests/store/backend_layout_test.ts);
 * see docs/architecture.md for which files are SQLite's own helpers.
 *
 * @module
 */
import type { Store } from "../store.ts";
import { createAdminViewStore } from "./admin_views.ts";
import { createApiKeyStore } from "./api_keys.ts";
import { createAuditStore } from "./audit.ts";
import { openConnection, type SqliteStoreOptions } from "./connection.ts";
import { createGrantFeedStore } from "./grant_feed.ts";
import { createLifecycleStore } from "./lifecycle.ts";
import { createLimitStore } from "./limits.ts";
import { createLoginFailureStore } from "./login_failures.ts";
import { createPortalStore } from "./portal.ts";
import { createRetentionStore } from "./retention.ts";
import { createSqliteMaintenance, type SqliteMaintenance } from "./maintenance.ts";
import { createTokenStore } from "./tokens.ts";
import { createUserStore } from "./users.ts";

export type { SqliteStoreOptions } from "./connection.ts";

/** A SQLite store, with its SQLite-only operations beside the contract. */
export interface SqliteStore extends Store {
  readonly sqlite: SqliteMaintenance;
}

/**
 * Opens (creating if needed) the SQLite database at `path` (or `:memory:`),
 * applies pragmas and pending migrations, and returns the store.
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): SqliteStore {
  const conn = openConnection(path, options);
  const keys = createApiKeyStore(conn);
  const loginFailures = createLoginFailureStore(conn);
  return {
    ...createLifecycleStore(conn),
    ...createUserStore(conn, { keys, loginFailures }),
    ...keys,
    ...createTokenStore(conn),
    ...createGrantFeedStore(conn),
    ...loginFailures,
    ...createAuditStore(conn),
    ...createRetentionStore(conn),
    ...createAdminViewStore(conn),
    ...createPortalStore(conn),
    ...createLimitStore(conn),
    sqlite: createSqliteMaintenance(conn),
  };
}
