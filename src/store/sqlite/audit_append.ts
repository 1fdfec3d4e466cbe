/**
 * How a SQLite write appends its audit entries: one prepared insert per entry, inside the write's
 * transaction (connection.ts `write`), declared "keeps-grants" since the gate never reads the log.
 *
 * @module
 */
import type { AuditEntries, AuditEntry } from "../store.ts";
import { listAuditEntries } from "../audit_entries.ts";
import type { Connection } from "./connection.ts";

/** Appends a write's audit entries, inside its transaction. */
export function createAuditAppender(sql: Connection["sql"]): (entries: AuditEntries) => void {
  // Keeps grants: the audit table is not read by the gate.
  const auditInsert = sql(
    `INSERT INTO audit_log (at, actor, action, subject, detail)
     VALUES (:at, :actor, :action, :subject, :detail)`,
    "keeps-grants",
  );

  function appendEntry(entry: AuditEntry): void {
    auditInsert.run({
      at: entry.at,
      actor: entry.actor,
      action: entry.action,
      subject: entry.subject,
      detail: JSON.stringify(entry.detail ?? {}),
    });
  }

  return (entries) => {
    for (const entry of listAuditEntries(entries)) appendEntry(entry);
  };
}
