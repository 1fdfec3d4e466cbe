/**
 * {@link RetentionStore} on PostgreSQL: bounded deletes of ended tokens and old audit rows,
 * and row counts.
 *
 * @module
 */
import type { RetentionStore, StoreTable, TokenBatch } from "../store.ts";
import type { PgContext } from "./db.ts";
import { ENDED_TOKEN_IDS, EVER } from "./rows.ts";

const TABLES: readonly StoreTable[] = [
  "users",
  "api_keys",
  "tokens",
  "login_failures",
  "audit_log",
];

export function createRetentionStore(db: PgContext): RetentionStore {
  async function deleteEndedTokens(batch: TokenBatch) {
    const ids = await db.write(async (tx) => {
      const rows = await tx.unsafe(
        `DELETE FROM tokens WHERE id IN (${ENDED_TOKEN_IDS}) RETURNING id`,
        [batch.cutoff, batch.size, batch.endedSince ?? EVER],
      );
      return rows.map((row) => Number(row.id));
    }, {
      // A cached grant of an expired token answers token_expired; once its row is gone it
      // must answer invalid_token, as on SQLite.
      ends: (deleted) => deleted.map((id) => ({ kind: "token", id })),
    });
    return ids.length;
  }

  return {
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

    async countRows(table) {
      if (!TABLES.includes(table)) throw new RangeError(`Unknown table "${table}"`);
      const [{ n }] = await db.read((sql) =>
        sql<{ n: number }[]>`SELECT count(*) AS n FROM ${sql(table)}`
      );
      return n;
    },
  };
}
