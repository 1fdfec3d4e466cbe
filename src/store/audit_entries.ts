/**
 * A change's audit entries as every backend reads them (see `AuditEntries` in store.ts).
 *
 * @module
 */
import type { AuditEntries, AuditEntry } from "./store.ts";

/** The entries as a list: none, one or several. */
export function listAuditEntries(entries: AuditEntries): readonly AuditEntry[] {
  if (entries === undefined) return [];
  return Array.isArray(entries) ? entries as readonly AuditEntry[] : [entries as AuditEntry];
}

/**
 * A new token's entries with its id first in their detail, as `Store.insertToken` records them
 * (PostgreSQL writes the same in SQL, in the statement that inserts the token).
 */
export function withTokenId(entries: AuditEntries, id: number): AuditEntry[] {
  return listAuditEntries(entries).map((entry) => ({
    ...entry,
    detail: Object.assign({ token_id: id }, entry.detail, { token_id: id }),
  }));
}
