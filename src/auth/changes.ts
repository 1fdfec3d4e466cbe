/**
 * What every audited change of the domain needs: the store, the clock, who
 * acts (the audit log's actor), and an optional observer told of each audit
 * entry once it has committed (the admin CLI prints them as its change log).
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { AuditEntries, AuditEntry, Store } from "../store/store.ts";
import type { AuditAction } from "./audit.ts";

/** The dependencies of an audited change. */
export interface ChangeDeps {
  store: Store;
  clock: Clock;
  /** `cli:<user>` or `api_key:<id>` (see audit.ts). */
  actor: string;
  /** Told of each audit entry after its change committed. */
  noteChange?(entry: AuditEntry): void;
}

/** An audit entry by `deps.actor`, now. */
export function toAuditEntry(
  deps: ChangeDeps,
  action: AuditAction,
  subject: string,
  detail: Record<string, string | number | null> = {},
): AuditEntry {
  return { at: deps.clock.now(), actor: deps.actor, action, subject, detail };
}

/**
 * Appends an audit entry by `deps.actor`, now, as a change of its own (no other write goes with
 * it), then tells `deps.noteChange` of it.
 */
export async function recordAudit(
  deps: ChangeDeps,
  action: AuditAction,
  subject: string,
  detail: Record<string, string | number | null> = {},
): Promise<void> {
  const entry = toAuditEntry(deps, action, subject, detail);
  await deps.store.appendAudit(entry);
  deps.noteChange?.(entry);
}

/**
 * Wraps an audit function so the entries it returns are remembered, and
 * returns a function that tells `deps.noteChange` of them (after the commit).
 */
export function observeAudit<T>(
  deps: ChangeDeps,
  audit: (result: T) => AuditEntries,
): { audit: (result: T) => AuditEntries; notify(): void } {
  let written: AuditEntries;
  return {
    audit(result) {
      written = audit(result);
      return written;
    },
    notify() {
      if (written === undefined || deps.noteChange === undefined) return;
      for (const entry of Array.isArray(written) ? written : [written as AuditEntry]) {
        deps.noteChange(entry);
      }
    },
  };
}
