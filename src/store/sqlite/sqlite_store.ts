/**
 * The SQLite backend of the store contract (src/store/store.ts): one
 * connection (connection.ts) and one module per table group, composed here.
 *
 * @module
 */
import { existsSync } from "node:fs";
import type { AuditStore, LifecycleStore, RetentionStore, Store, StoreTable } from "../store.ts";
import { createAdminViewStore } from "./admin_views.ts";
import { toAuditRecord } from "./audit_search.ts";
import { createApiKeyStore } from "./api_keys.ts";
import {
  type Connection,
  openConnection,
  type Row,
  type SqliteStoreOptions,
} from "./connection.ts";
import { createLimitStore } from "./limits.ts";
import { createLoginFailureStore } from "./login_failures.ts";
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
  const users = createUserStore(conn);
  const keys = createApiKeyStore(conn);
  const loginFailures = createLoginFailureStore(conn);
  return {
    ...users,
    ...keys,
    async findUserAndKey(email, keyHash, read) {
      const user = await users.findUserByEmail(email);
      const key = await keys.findApiKeyByHash(keyHash);
      if (read === undefined) return { user, key, failures: [] };
      const failures = [
        ...await loginFailures.findLoginFailures(read.subjects, read.now),
        ...key === undefined
          ? []
          : await loginFailures.findLoginFailures([`${read.keySubjectPrefix}${key.id}`], read.now),
      ];
      failures.sort((a, b) => a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0);
      return { user, key, failures };
    },
    ...createTokenStore(conn),
    ...loginFailures,
    ...createAuditAndLifecycle(conn),
    ...createAdminViewStore(conn),
    ...createLimitStore(conn),
    readGrantEpoch: conn.readGrantEpoch,
    readGrantChanges: conn.readGrantChanges,
    readGrantInvalidations: conn.readGrantInvalidations,
    sqlite: createSqliteMaintenance(conn),
  };
}

function createAuditAndLifecycle(
  conn: Connection,
): LifecycleStore & AuditStore & Pick<RetentionStore, "countRows" | "deleteAuditBefore"> {
  const { sql } = conn;
  const auditSince = sql("SELECT * FROM audit_log WHERE at >= :since ORDER BY id");
  const ping = sql("SELECT 1 AS ok");
  // The delete trigger lets through only rows older than a cutoff written in the same
  // transaction (migration 7).
  const pruneOpen = sql("INSERT INTO audit_prune (before_at) VALUES (:before)", "keeps-grants");
  const pruneRows = sql(
    `DELETE FROM audit_log WHERE id IN (
       SELECT id FROM audit_log WHERE at < :before ORDER BY at, id LIMIT :size)`,
    "keeps-grants",
  );
  const pruneClose = sql("DELETE FROM audit_prune", "keeps-grants");
  const counts: Record<StoreTable, ReturnType<typeof sql>> = {
    users: sql("SELECT count(*) AS n FROM users"),
    api_keys: sql("SELECT count(*) AS n FROM api_keys"),
    tokens: sql("SELECT count(*) AS n FROM tokens"),
    login_failures: sql("SELECT count(*) AS n FROM login_failures"),
    audit_log: sql("SELECT count(*) AS n FROM audit_log"),
  };
  return {
    checkStoreReady() {
      return conn.read(() => {
        // A deleted database file still answers through its open descriptor,
        // but nothing written now would survive a restart: not ready.
        if (conn.path !== ":memory:" && !existsSync(conn.path)) return false;
        return (ping.get() as Row | undefined)?.ok === 1;
      });
    },
    findWriteFailure() {
      return conn.read(conn.findWriteFailure);
    },
    // deno-lint-ignore require-await
    async closeStore() {
      conn.close();
    },
    async appendAudit(entry) {
      await conn.write(() => undefined, entry);
    },
    listAudit(since = 0) {
      return conn.read(() => (auditSince.all({ since }) as Row[]).map(toAuditRecord));
    },
    deleteAuditBefore(batch) {
      return conn.write(() => {
        pruneOpen.run({ before: batch.before });
        const { changes } = pruneRows.run({ before: batch.before, size: batch.size });
        pruneClose.run();
        return Number(changes);
      });
    },
    countRows(table) {
      return conn.read(() => (counts[table].get() as { n: number }).n);
    },
  };
}
