/**
 * Operators of the admin API, and the paged listings it shows, on
 * PostgreSQL: the same contract as the SQLite backend's admin_views.ts
 * (pinned by tests/store/contract_admin.ts).
 *
 * @module
 */
import type { AdminStore, AuditRecord, TokenListing } from "../store.ts";
import type { PgContext } from "./db.ts";
import { type Row, toOperator, toTokenRow, toUser } from "../rows.ts";
import { tokenValid } from "./rows.ts";

function toAuditRecord(row: Row): AuditRecord {
  return {
    id: row.id as number,
    at: row.at as number,
    actor: row.actor as string,
    action: row.action as string,
    subject: row.subject as string,
    detail: row.detail as AuditRecord["detail"],
  };
}

const NO_CURSOR = Number.MAX_SAFE_INTEGER;

export function createAdminViewMethods(db: PgContext): AdminStore {
  return {
    insertOperator(operator, change) {
      // Operators are not read by the gate: no write here ends a token grant.
      return db.write(async (tx) => {
        const [row] = await tx<Row[]>`
          INSERT INTO operators (name, role, token_hash, prefix, created_at)
          VALUES (${operator.name}, ${operator.role}, ${operator.tokenHash}, ${operator.prefix},
            ${change.now})
          RETURNING *`;
        return toOperator(row);
      }, { audit: change.audit, endsGrants: () => false });
    },

    async findOperatorByHash(tokenHash) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM operators WHERE token_hash = ${tokenHash}`
      );
      return row && toOperator(row);
    },

    async listOperators() {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM operators ORDER BY name COLLATE "C", id`
      );
      return rows.map(toOperator);
    },

    revokeOperator(id, change) {
      return db.write(async (tx) => {
        const rows = await tx`UPDATE operators SET revoked_at = ${change.now}
          WHERE id = ${id} AND revoked_at IS NULL`;
        return rows.count === 1;
      }, { audit: change.audit, endsGrants: () => false });
    },

    async searchUsers(query) {
      const search = (query.search ?? "").toLowerCase();
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM users
          WHERE email COLLATE "C" > ${query.afterEmail ?? ""}
            AND (${search} = '' OR strpos(email, ${search}) > 0)
          ORDER BY email COLLATE "C" LIMIT ${query.limit}`
      );
      return rows.map(toUser);
    },

    async searchTokensOfUser(userId, query) {
      const { now } = query;
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT t.id, t.api_key_id, t.issued_at, t.expires_at, t.revoked_at,
            (${tokenValid(sql, now)} AND t.expires_at > ${now}) AS live
          FROM tokens t JOIN api_keys k ON k.id = t.api_key_id JOIN users u ON u.id = t.user_id
          WHERE t.user_id = ${userId} AND t.id < ${query.beforeId ?? NO_CURSOR}
            ${query.liveOnly ? sql`AND ${tokenValid(sql, now)} AND t.expires_at > ${now}` : sql``}
          ORDER BY t.id DESC LIMIT ${query.limit}`
      );
      return rows.map((row): TokenListing => ({ ...toTokenRow(row), live: row.live === true }));
    },

    async searchAudit(query) {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM audit_log
          WHERE id < ${query.beforeId ?? NO_CURSOR}
            AND at >= ${query.from ?? 0} AND at < ${query.to ?? NO_CURSOR}
            ${query.actor === undefined ? sql`` : sql`AND actor = ${query.actor}`}
            ${query.action === undefined ? sql`` : sql`AND action = ${query.action}`}
            ${query.subject === undefined ? sql`` : sql`AND subject = ${query.subject}`}
          ORDER BY id DESC LIMIT ${query.limit}`
      );
      return rows.map(toAuditRecord);
    },
  };
}
