/**
 * Making a deleted user's audit rows anonymous on SQLite (src/store/audit_anonymize.ts), inside
 * the delete's transaction, and its mail in the outbox gone.
 *
 * The append-only trigger (portal_schema.ts, `PORTAL_REDACT_SQL`) lets an update through only
 * while `keygate_audit_redact()` names a `user:deleted:…` id. That function is defined by this
 * module on each connection the store opens ({@link defineAuditRedact}), and answers the id only
 * while {@link createAuditAnonymizer}'s function runs: synchronously, inside one write
 * transaction, so no other statement of this connection runs meanwhile. Other connections (the
 * `sqlite3` shell, a script) lack the function, so every update of theirs fails.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import {
  AUDIT_HOLD_STARTS,
  AUDIT_ID_END,
  type AuditRowRead,
  type HoldStart,
  MAX_ADDRESS_HOLDS,
  planAuditRewrites,
  toAddressHold,
} from "../audit_anonymize.ts";
import type { Connection, Row } from "./connection.ts";

/** The SQL function the append-only trigger asks for the id being written (or NULL). */
export const AUDIT_REDACT_FUNCTION = "keygate_audit_redact";

/** The id each connection's anonymization is writing now. */
const redacting = new WeakMap<DatabaseSync, string>();

/** Defines {@link AUDIT_REDACT_FUNCTION} on a connection of the store (before migrating). */
export function defineAuditRedact(db: DatabaseSync): void {
  db.function(AUDIT_REDACT_FUNCTION, { deterministic: false }, () => redacting.get(db) ?? null);
}

function toRowRead(row: Row): AuditRowRead {
  return {
    id: Number(row.id),
    actor: row.actor as string,
    subject: row.subject as string,
    detail: JSON.parse(row.detail as string) as Record<string, unknown>,
  };
}

/**
 * Binds the statements; the function runs inside a write (before the user's row goes) and
 * resolves to the rows that took `ref` as subject.
 */
export function createAuditAnonymizer(
  conn: Connection,
): (user: { id: number; email: string; actor?: string }, ref: string) => number {
  const { sql } = conn;
  const holdStart = sql(
    `SELECT id, action, detail FROM audit_log
     WHERE subject = :subject AND id < :until_id AND action IN (SELECT value FROM json_each(:actions))
     ORDER BY id DESC LIMIT 1`,
  );
  const heldRows = sql(
    `SELECT id, actor, subject, detail FROM audit_log
     WHERE id >= :from_id AND id < :until_id AND (subject = :subject OR instr(detail, :quoted) > 0)`,
  );
  const actorRows = sql(
    `SELECT id, actor, subject, detail FROM audit_log WHERE id >= :from_id AND actor = :actor`,
  );
  const rewrite = sql(
    "UPDATE audit_log SET subject = :subject, detail = :detail WHERE id = :id",
    "keeps-grants",
  );
  // Mail to an address another user holds now may be theirs: it stays.
  const mailDelete = sql(
    `DELETE FROM mail_outbox WHERE recipient = :address
     AND NOT EXISTS (SELECT 1 FROM users WHERE email = :address AND id <> :user_id)`,
    "keeps-grants",
  );
  const actions = JSON.stringify(AUDIT_HOLD_STARTS);
  return (user, ref) => {
    const holds = [];
    let next: { address: string; untilId: number } | undefined = {
      address: user.email,
      untilId: AUDIT_ID_END,
    };
    while (next !== undefined && holds.length < MAX_ADDRESS_HOLDS) {
      const row = holdStart.get({
        subject: `user:${next.address}`,
        until_id: next.untilId,
        actions,
      }) as Row | undefined;
      const start: HoldStart | undefined = row && {
        id: Number(row.id),
        action: row.action as string,
        detail: JSON.parse(row.detail as string) as Record<string, unknown>,
      };
      const step = toAddressHold(next.address, next.untilId, start);
      holds.push(step.hold);
      next = step.before;
    }
    const rows = new Map<number, AuditRowRead>();
    for (const hold of holds) {
      const found = heldRows.all({
        from_id: hold.fromId,
        until_id: hold.untilId,
        subject: `user:${hold.address}`,
        quoted: JSON.stringify(hold.address),
      }) as Row[];
      for (const row of found) rows.set(Number(row.id), toRowRead(row));
    }
    if (user.actor !== undefined) {
      const fromId = Math.min(...holds.map((hold) => hold.fromId));
      for (const row of actorRows.all({ from_id: fromId, actor: user.actor }) as Row[]) {
        rows.set(Number(row.id), toRowRead(row));
      }
    }
    const plan = planAuditRewrites([...rows.values()], { holds, actor: user.actor, ref });
    redacting.set(conn.db, ref);
    try {
      for (const { id, subject, detail } of plan.rewrites) {
        rewrite.run({ id, subject, detail: JSON.stringify(detail) });
      }
    } finally {
      redacting.delete(conn.db);
    }
    for (const address of plan.addresses) mailDelete.run({ address, user_id: user.id });
    return plan.renamed;
  };
}
