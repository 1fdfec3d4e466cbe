/**
 * Pages of the audit log on PostgreSQL, by the same plan as SQLite's
 * audit_search.ts: one statement per combination of filters, each read
 * through an index in the page's order (time, then id, newest first), keyset
 * paging from an (at, id) cursor, and a scan of at most `AUDIT_SCAN_ROWS`
 * index entries when two or more of actor, action and subject are given.
 *
 * @module
 */
import type postgres from "postgres";
import type { AuditCursor, AuditPage, AuditQuery, AuditRecord } from "../store.ts";
import { AUDIT_SCAN_ROWS } from "../store_admin.ts";
import type { Row } from "../rows.ts";
import type { PgContext } from "./db.ts";

/** The filters that name one column's value, in the order in which one drives the scan. */
const EQUALS = ["subject", "actor", "action"] as const;

export function toAuditRecord(row: Row): AuditRecord {
  return {
    id: Number(row.id),
    at: Number(row.at),
    actor: row.actor as string,
    action: row.action as string,
    subject: row.subject as string,
    detail: row.detail as AuditRecord["detail"],
  };
}

/** Where a page's scan starts: the cursor, or `to` when that comes first. */
function toUpperBound(query: AuditQuery): AuditCursor | undefined {
  const { cursor, to } = query;
  if (to !== undefined && (cursor === undefined || to <= cursor.at)) return { at: to, id: 0 };
  return cursor;
}

/** The conditions of a scan through one index: its column, the time range, the cursor. */
function toScanWhere(sql: postgres.Sql, drive: string | undefined, query: AuditQuery) {
  const upper = toUpperBound(query);
  const where = [
    drive === undefined
      ? undefined
      : sql`${sql(drive)} = ${query[drive as typeof EQUALS[number]]!}`,
    query.from === undefined ? undefined : sql`at >= ${query.from}`,
    upper === undefined ? undefined : sql`(at, id) < (${upper.at}, ${upper.id})`,
  ].filter((part) => part !== undefined);
  if (where.length === 0) return sql``;
  return where.reduce(
    (all, part, i) => i === 0 ? sql`WHERE ${part}` : sql`${all} AND ${part}`,
    sql``,
  );
}

/** `Store.searchAuditPage` on PostgreSQL. */
export function createAuditSearch(db: PgContext): (query: AuditQuery) => Promise<AuditPage> {
  return (query) =>
    db.read(async (sql): Promise<AuditPage> => {
      const [drive, ...rest] = EQUALS.filter((name) => query[name] !== undefined);
      const scanWhere = toScanWhere(sql, drive, query);
      let rows: Row[];
      if (rest.length === 0) {
        rows = await sql<Row[]>`SELECT * FROM audit_log ${scanWhere}
          ORDER BY at DESC, id DESC LIMIT ${query.limit + 1}`;
      } else {
        const filters = rest.reduce(
          (all, name, i) =>
            i === 0
              ? sql`${sql(name)} = ${query[name]!}`
              : sql`${all} AND ${sql(name)} = ${query[name]!}`,
          sql``,
        );
        rows = await sql<Row[]>`SELECT * FROM (
            SELECT * FROM audit_log ${scanWhere}
            ORDER BY at DESC, id DESC LIMIT ${AUDIT_SCAN_ROWS}) AS scan
          WHERE ${filters} ORDER BY at DESC, id DESC LIMIT ${query.limit + 1}`;
        if (rows.length <= query.limit) {
          // A short page: did the scan stop at its bound? Then go on after its last entry.
          const [end] = await sql<Row[]>`SELECT at, id FROM audit_log ${scanWhere}
            ORDER BY at DESC, id DESC OFFSET ${AUDIT_SCAN_ROWS - 1} LIMIT 1`;
          return toPage(rows, query.limit, end);
        }
      }
      return toPage(rows, query.limit, undefined);
    });
}

function toPage(rows: Row[], limit: number, scanEnd: Row | undefined): AuditPage {
  const entries = rows.slice(0, limit).map(toAuditRecord);
  if (rows.length > limit) {
    const last = entries[entries.length - 1];
    return { entries, next: { at: last.at, id: last.id } };
  }
  if (scanEnd === undefined) return { entries };
  return { entries, next: { at: Number(scanEnd.at), id: Number(scanEnd.id) } };
}
