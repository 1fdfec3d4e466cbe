/**
 * One poll's read of the grant change record (grant_epoch.ts describes the protocol): in one
 * statement, so one snapshot, the counter, the tag at the position seen, the rows after it and
 * the record table's identity.
 *
 * @module
 */
import type postgres from "postgres";
import type { RecordRow } from "../grant_change_log.ts";

/** Rows of the change record one poll reads; an instance further behind drops its caches. */
export const POLL_ROWS = 10_000;

/** What one poll read. */
export interface RecordSnapshot {
  /** The counter and the tag recorded at it. */
  head: { position: number; tag: number | null };
  /** The change record table's oid: a restore (pg_restore --clean, a new database) changes it. */
  identity: string;
  /** The tag at the position the poll read from. */
  tagAtCursor: number | null;
  /** The rows after that position, up to the counter, at most {@link POLL_ROWS}. */
  rows: RecordRow[];
  /** Whether more rows than {@link POLL_ROWS} were there. */
  truncated: boolean;
}

/** Reads the record after position `from` through `sql`. */
export async function readChangeRecord(sql: postgres.Sql, from: number): Promise<RecordSnapshot> {
  const [row] = await sql<{
    head: string;
    head_tag: string | null;
    cursor_tag: string | null;
    rows: [number, string, number | null][];
    identity: string;
  }[]>`
    SELECT e.epoch AS head,
      -- A restore (pg_restore --clean, or a new database) recreates the table: a new oid.
      (SELECT 'grant_changes'::regclass::oid::text) AS identity,
      (SELECT tag FROM grant_changes WHERE position = e.epoch LIMIT 1) AS head_tag,
      (SELECT tag FROM grant_changes WHERE position = ${from} LIMIT 1) AS cursor_tag,
      coalesce((SELECT jsonb_agg(jsonb_build_array(position, scope, subject) ORDER BY position)
        FROM (SELECT position, scope, subject FROM grant_changes
          WHERE position > ${from} AND position <= e.epoch
          ORDER BY position LIMIT ${POLL_ROWS + 1}) AS r), '[]') AS rows
    FROM grant_epoch e WHERE e.id = 1`;
  if (row === undefined) throw new Error("The grant_epoch row is missing");
  const rows: RecordRow[] = row.rows.map(([position, scope, subject]) => ({
    position,
    scope,
    subject,
  }));
  return {
    head: { position: Number(row.head), tag: toTag(row.head_tag) },
    identity: row.identity,
    tagAtCursor: toTag(row.cursor_tag),
    rows,
    truncated: rows.length > POLL_ROWS,
  };
}

/** A tag as PostgreSQL returns a bigint (text), as a number. */
function toTag(value: string | number | null): number | null {
  return value === null ? null : Number(value);
}
