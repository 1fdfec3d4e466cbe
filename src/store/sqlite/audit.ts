/**
 * {@link AuditStore} on SQLite: appending an entry on its own, and reading the log.
 *
 * @module
 */
import type { AuditStore } from "../store.ts";
import { toAuditRecord } from "./audit_search.ts";
import type { Connection, Row } from "./connection.ts";
import { createUserCheck } from "./user_check.ts";

export function createAuditStore(conn: Connection): AuditStore {
  const auditSince = conn.sql("SELECT * FROM audit_log WHERE at >= :since ORDER BY id");
  const requireUser = createUserCheck(conn);
  return {
    async appendAudit(entry, { ofUser } = {}) {
      await conn.write(() => requireUser(ofUser), entry);
    },
    listAudit(since = 0) {
      return conn.read(() => (auditSince.all({ since }) as Row[]).map(toAuditRecord));
    },
  };
}
