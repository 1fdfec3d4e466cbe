/**
 * {@link AuditStore} on PostgreSQL: appending an entry on its own, and reading the log.
 *
 * @module
 */
import type { AuditRecord, AuditStore } from "../store.ts";
import type { PgContext } from "./db.ts";
import { holdUser } from "./user_lock.ts";
import { type Row } from "../rows.ts";

export function createAuditStore(db: PgContext): AuditStore {
  return {
    async appendAudit(entry, { ofUser } = {}) {
      await db.write((tx) => holdUser(tx, ofUser), { audit: entry, ends: () => [] });
    },

    async listAudit(since = 0) {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM audit_log WHERE at >= ${since} ORDER BY id`
      );
      return rows.map((row): AuditRecord => ({
        id: row.id as number,
        at: row.at as number,
        actor: row.actor as string,
        action: row.action as string,
        subject: row.subject as string,
        detail: row.detail as AuditRecord["detail"],
      }));
    },
  };
}
