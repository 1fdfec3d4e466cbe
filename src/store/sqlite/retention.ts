/**
 * {@link RetentionStore} on SQLite: bounded deletes of ended tokens and old audit rows, and
 * row counts.
 *
 * @module
 */
import type { RetentionStore, StoreTable } from "../store.ts";
import type { Connection, Statement } from "./connection.ts";
import { EVER } from "../rows.ts";
import { ENDED_TOKEN_IDS } from "./rules.ts";

export function createRetentionStore(conn: Connection): RetentionStore {
  const { sql } = conn;
  // At most :size tokens ended at or before :cutoff (ENDED_TOKEN_IDS: through indexes), of keys
  // and users that ended after :since.
  // Counts as a grant write although only ended tokens go: a cached grant of an expired token
  // answers `token_expired`, and must answer `invalid_token` once its row is gone. It trims:
  // a batch that deleted nothing answers nothing about a grant, so it waits for no WAL sync (a
  // sweep that finds nothing syncs nothing; before 0.21.0 each of its windows waited for one).
  const tokensPurgeBatch = sql(
    `DELETE FROM tokens WHERE id IN (${ENDED_TOKEN_IDS})`,
    "trims-grants",
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

  return {
    deleteEndedTokens({ size, cutoff, endedSince }) {
      return conn.write(() =>
        Number(tokensPurgeBatch.run({ size, cutoff, since: endedSince ?? EVER }).changes)
      );
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
