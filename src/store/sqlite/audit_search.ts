/**
 * Pages of the audit log that stay fast as it grows: one statement per
 * combination of filters (no `:x IS NULL OR` that keeps an index unused),
 * each read through an index whose order is the page's order (time, then
 * id, newest first), and keyset paging from an (at, id) cursor. With two or
 * more of actor, action and subject, the first's index drives a scan of at
 * most `AUDIT_SCAN_ROWS` entries, so a page that matches nothing is as cheap
 * as one that matches everything. tests/store/contract_admin.ts pins the
 * pages and the plans.
 *
 * @module
 */
import type { AuditCursor, AuditPage, AuditQuery, AuditRecord } from "../store.ts";
import { AUDIT_SCAN_ROWS } from "../store_admin.ts";
import type { Connection, Row, Statement } from "./connection.ts";

/** The filters that name one column's value, in the order in which one drives the scan. */
const EQUALS = ["subject", "actor", "action"] as const;

export function toAuditRecord(row: Row): AuditRecord {
  return {
    id: row.id as number,
    at: row.at as number,
    actor: row.actor as string,
    action: row.action as string,
    subject: row.subject as string,
    detail: JSON.parse(row.detail as string),
  };
}

/** Where a page's scan starts: the cursor, or `to` when that comes first. */
export function toUpperBound(query: AuditQuery): AuditCursor | undefined {
  const { cursor, to } = query;
  if (to !== undefined && (cursor === undefined || to <= cursor.at)) return { at: to, id: 0 };
  return cursor;
}

/** The conditions of a scan through one index: its column, the time range, the cursor. */
function toScanWhere(drive: string | undefined, query: AuditQuery): string {
  const where: string[] = [];
  if (drive !== undefined) where.push(`${drive} = :${drive}`);
  if (query.from !== undefined) where.push("at >= :from");
  if (toUpperBound(query) !== undefined) where.push("(at, id) < (:upper_at, :upper_id)");
  return where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`;
}

/** The SQL of one combination of filters: the page, and (with a bounded scan) its end. */
export function toAuditSql(query: AuditQuery): { page: string; scanEnd?: string } {
  const [drive, ...rest] = EQUALS.filter((name) => query[name] !== undefined);
  const scanWhere = toScanWhere(drive, query);
  if (rest.length === 0) {
    return {
      page: `SELECT * FROM audit_log ${scanWhere} ORDER BY at DESC, id DESC LIMIT :limit`,
    };
  }
  const scan = `WITH scan AS (
      SELECT at, id FROM audit_log ${scanWhere} ORDER BY at DESC, id DESC LIMIT :scan_rows)`;
  return {
    page: `${scan}
      SELECT a.* FROM scan JOIN audit_log a ON a.id = scan.id
      WHERE ${rest.map((name) => `a.${name} = :${name}`).join(" AND ")}
      ORDER BY scan.at DESC, scan.id DESC LIMIT :limit`,
    // The scan's last entry, if it reached its bound.
    scanEnd: `SELECT at, id FROM audit_log ${scanWhere}
      ORDER BY at DESC, id DESC LIMIT 1 OFFSET :scan_last`,
  };
}

function toParams(query: AuditQuery, text: string): Record<string, string | number> {
  const upper = toUpperBound(query);
  const all: Record<string, string | number | undefined> = {
    subject: query.subject,
    actor: query.actor,
    action: query.action,
    from: query.from,
    upper_at: upper?.at,
    upper_id: upper?.id,
    limit: query.limit + 1,
    scan_rows: AUDIT_SCAN_ROWS,
    scan_last: AUDIT_SCAN_ROWS - 1,
  };
  // node:sqlite refuses a named parameter the statement does not have.
  return Object.fromEntries(
    Object.entries(all).filter(([name, value]) => value !== undefined && text.includes(`:${name}`)),
  ) as Record<string, string | number>;
}

/** `Store.searchAuditPage` on SQLite, with its statements prepared once per combination. */
export function createAuditSearch(conn: Connection): (query: AuditQuery) => Promise<AuditPage> {
  const statements = new Map<string, Statement>();
  function prepared(text: string): Statement {
    let statement = statements.get(text);
    if (statement === undefined) {
      statement = conn.sql(text);
      statements.set(text, statement);
    }
    return statement;
  }

  return (query) =>
    conn.read((): AuditPage => {
      const sql = toAuditSql(query);
      const rows = prepared(sql.page).all(toParams(query, sql.page)) as Row[];
      const entries = rows.slice(0, query.limit).map(toAuditRecord);
      if (rows.length > query.limit) {
        const last = entries[entries.length - 1];
        return { entries, next: { at: last.at, id: last.id } };
      }
      if (sql.scanEnd === undefined) return { entries };
      const end = prepared(sql.scanEnd).get(toParams(query, sql.scanEnd)) as Row | undefined;
      if (end === undefined) return { entries };
      return { entries, next: { at: end.at as number, id: end.id as number } };
    });
}
