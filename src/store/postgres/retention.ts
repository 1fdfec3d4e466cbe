/**
 * {@link RetentionStore} on PostgreSQL: bounded deletes of ended tokens and old audit rows,
 * and row counts.
 *
 * @module
 */
import type { RetentionStore, StoreTable } from "../store.ts";
import type { PgContext } from "./db.ts";
import { TOKEN_ENDED_AT } from "./rows.ts";

/** Token row ids per transaction for `purgeEndedTokens` (as on SQLite). */
export const PURGE_BATCH_ROWS = 500;

const TABLES: readonly StoreTable[] = [
  "users",
  "api_keys",
  "tokens",
  "login_failures",
  "audit_log",
];

export function createRetentionStore(db: PgContext): RetentionStore {
  async function deleteEndedTokens(batch: { afterId: number; size: number; cutoff: number }) {
    const ids = await db.write(async (tx) => {
      const rows = await tx`DELETE FROM tokens WHERE id IN (
          SELECT t.id FROM tokens t
          JOIN api_keys k ON k.id = t.api_key_id
          JOIN users u ON u.id = t.user_id
          WHERE t.id > ${batch.afterId} AND t.id <= ${batch.afterId + batch.size}
            AND ${tx.unsafe(TOKEN_ENDED_AT)} <= ${batch.cutoff})
        RETURNING id`;
      return rows.map((row) => Number(row.id));
    }, {
      // A cached grant of an expired token answers token_expired; once its row is gone it
      // must answer invalid_token, as on SQLite.
      ends: (deleted) => deleted.map((id) => ({ kind: "token", id })),
    });
    return ids.length;
  }

  async function findTokenIdRange() {
    const [row] = await db.read((sql) =>
      sql<{ first: number | null; last: number | null }[]>`
        SELECT min(id) AS first, max(id) AS last FROM tokens`
    );
    return row.first === null ? undefined : { first: row.first, last: row.last! };
  }

  return {
    findTokenIdRange,
    deleteEndedTokens,

    deleteAuditBefore(batch) {
      return db.write(async (tx) => {
        // The append-only trigger lets through only rows older than this (schema.ts, 4).
        await tx`SELECT set_config('keygate.audit_prune_before', ${String(batch.before)}, true)`;
        const rows = await tx`DELETE FROM audit_log WHERE id IN (
            SELECT id FROM audit_log WHERE at < ${batch.before}
            ORDER BY at, id LIMIT ${batch.size})
          RETURNING id`;
        return rows.length;
      }, { ends: () => [] });
    },

    async purgeEndedTokens(cutoff, change) {
      const range = await findTokenIdRange();
      let deleted = 0;
      if (range !== undefined) {
        for (let after = range.first - 1; after < range.last; after += PURGE_BATCH_ROWS) {
          deleted += await deleteEndedTokens({ afterId: after, size: PURGE_BATCH_ROWS, cutoff });
        }
      }
      await db.write(() => Promise.resolve(deleted), {
        audit: change.audit,
        ends: () => [],
      });
      return deleted;
    },

    async countRows(table) {
      if (!TABLES.includes(table)) throw new RangeError(`Unknown table "${table}"`);
      const [{ n }] = await db.read((sql) =>
        sql<{ n: number }[]>`SELECT count(*) AS n FROM ${sql(table)}`
      );
      return n;
    },
  };
}
