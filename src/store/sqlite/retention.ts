/**
 * {@link RetentionStore} on SQLite: bounded deletes of ended tokens and old audit rows, and
 * row counts.
 *
 * @module
 */
import type { RetentionStore, StoreTable, TokenIdRange } from "../store.ts";
import type { Connection, Statement } from "./connection.ts";
import { TOKEN_ENDED_AT } from "./rules.ts";

/** Token row ids per transaction when deleting ended tokens in one go (`token purge`). */
export const PURGE_BATCH_ROWS = 500;

export function createRetentionStore(conn: Connection): RetentionStore {
  const { sql } = conn;
  const tokenIdBounds = sql("SELECT min(id) AS first, max(id) AS last FROM tokens");
  // A retention batch: a range of at most :size row ids, so no statement holds the lock long.
  // A token ended (see TOKEN_ENDED_AT) at or before :cutoff.
  // Counts as a grant write although only ended tokens go: a cached grant of an expired token
  // answers `token_expired`, and must answer `invalid_token` once its row is gone.
  const tokensPurgeRange = sql(
    `DELETE FROM tokens WHERE id IN (
       SELECT t.id FROM tokens t
       JOIN api_keys k ON k.id = t.api_key_id
       JOIN users u ON u.id = t.user_id
       WHERE t.id > :after AND t.id <= :after + :size AND ${TOKEN_ENDED_AT} <= :cutoff)`,
  );
  // The delete trigger lets through only rows older than a cutoff written in the same
  // transaction (migration 7).
  const pruneOpen = sql("INSERT INTO audit_prune (before_at) VALUES (:before)", "keeps-grants");
  const pruneRows = sql(
    `DELETE FROM audit_log WHERE id IN (
       SELECT id FROM audit_log WHERE at < :before ORDER BY at, id LIMIT :size)`,
    "keeps-grants",
  );
  const pruneClose = sql("DELETE FROM audit_prune", "keeps-grants");
  const counts: Record<StoreTable, Statement> = {
    users: sql("SELECT count(*) AS n FROM users"),
    api_keys: sql("SELECT count(*) AS n FROM api_keys"),
    tokens: sql("SELECT count(*) AS n FROM tokens"),
    login_failures: sql("SELECT count(*) AS n FROM login_failures"),
    audit_log: sql("SELECT count(*) AS n FROM audit_log"),
  };

  function idRange(): TokenIdRange | undefined {
    const row = tokenIdBounds.get() as { first: number | null; last: number | null };
    return row.first === null ? undefined : { first: row.first, last: row.last! };
  }

  function purgeRange(after: number, size: number, cutoff: number): number {
    return Number(tokensPurgeRange.run({ after, size, cutoff }).changes);
  }

  return {
    findTokenIdRange() {
      return conn.read(idRange);
    },

    deleteEndedTokens({ afterId, size, cutoff }) {
      return conn.write(() => purgeRange(afterId, size, cutoff));
    },

    purgeEndedTokens(cutoff, { audit }) {
      return conn.write(() => {
        const range = idRange();
        if (range === undefined) return 0;
        let deleted = 0;
        for (let after = range.first - 1; after < range.last; after += PURGE_BATCH_ROWS) {
          deleted += purgeRange(after, PURGE_BATCH_ROWS, cutoff);
        }
        return deleted;
      }, audit);
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
