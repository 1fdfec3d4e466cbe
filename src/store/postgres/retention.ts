/**
 * {@link RetentionStore} on PostgreSQL: bounded deletes of ended tokens and old audit rows,
 * and row counts.
 *
 * @module
 */
import type { RetentionStore, StoreTable, TokenBatch } from "../store.ts";
import type { PgContext } from "./db.ts";
import { EVER } from "../rows.ts";
import { ENDED_TOKEN_IDS } from "./rows.ts";

const TABLES: readonly StoreTable[] = [
  "users",
  "api_keys",
  "tokens",
  "login_failures",
  "audit_log",
];

/**
 * One batch of `deleteEndedTokens`: `$1` cutoff, `$2` size, `$3` ended since
 * ({@link ENDED_TOKEN_IDS}). Answers how many ids it found (`found`, on every row) and the ids it
 * deleted (`id`, null on the one row when none): under READ COMMITTED a row that another
 * transaction deletes meanwhile is waited for and then skipped, so a batch may find rows and
 * delete none.
 */
export const DELETE_ENDED_TOKENS = `WITH found AS MATERIALIZED (${ENDED_TOKEN_IDS}),
    gone AS (DELETE FROM tokens WHERE id IN (SELECT id FROM found) RETURNING id)
  SELECT (SELECT count(*) FROM found)::int AS found, g.id
  FROM (SELECT 1) AS one LEFT JOIN gone AS g ON true`;

export function createRetentionStore(db: PgContext): RetentionStore {
  /** One batch's transaction: how many ids it found, and those it deleted. */
  async function deleteBatch(batch: TokenBatch): Promise<{ found: number; deleted: number }> {
    let found = 0;
    const ids = await db.write(async (tx) => {
      const rows = await tx.unsafe(DELETE_ENDED_TOKENS, [
        batch.cutoff,
        batch.size,
        batch.endedSince ?? EVER,
      ]);
      found = Number(rows[0]?.found ?? 0);
      return rows.filter((row) => row.id !== null).map((row) => Number(row.id));
    }, {
      // A cached grant of an expired token answers token_expired; once its row is gone it
      // must answer invalid_token, as on SQLite.
      ends: (deleted) => deleted.map((id) => ({ kind: "token", id })),
    });
    return { found, deleted: ids.length };
  }

  async function deleteEndedTokens(batch: TokenBatch) {
    for (;;) {
      const { found, deleted } = await deleteBatch(batch);
      // Found rows but deleted none: another deleter (a user's deletion, `token purge`, a second
      // janitor) took them meanwhile, and rows past them may be left. Look again, so that 0 means
      // none is left (the janitor's window relies on it). The rows each round found are gone,
      // so this ends.
      if (deleted > 0 || found === 0) return deleted;
    }
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
