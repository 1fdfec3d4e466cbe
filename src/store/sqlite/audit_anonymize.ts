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
  type AuditRowAnswer,
  type AuditRowQuery,
  type AuditRowRead,
  walkAuditRows,
} from "../audit_anonymize.ts";
import type { Connection, Row } from "./connection.ts";

/** The SQL function the append-only trigger asks for the id being written (or NULL). */
export const AUDIT_REDACT_FUNCTION = "keygate_audit_redact";

/**
 * The reads of the walk (src/store/audit_anonymize.ts), each through an index (pinned by
 * tests/store/audit_anonymize_plan_test.ts): a hold's start and rows by subject through
 * `audit_log_by_subject`, rows by detail among the actions that may hold an address through
 * `audit_log_by_action_id` (the id range bounds the read of each action's entries), the user's
 * own rows through `audit_log_by_actor`.
 */
export const AUDIT_ANONYMIZE_SQL = {
  holdStart: `SELECT id, action, detail FROM audit_log INDEXED BY audit_log_by_subject
    WHERE subject = :subject AND id < :until_id
      AND action IN (SELECT value FROM json_each(:actions))
    ORDER BY id DESC LIMIT 1`,
  subjectRows: `SELECT id, actor, subject, detail FROM audit_log INDEXED BY audit_log_by_subject
    WHERE subject = :subject AND id >= :from_id AND id < :until_id`,
  detailRows: `SELECT id, actor, subject, detail FROM audit_log INDEXED BY audit_log_by_action_id
    WHERE action IN (SELECT value FROM json_each(:actions)) AND id >= :from_id AND id < :until_id
      AND instr(detail, :quoted) > 0`,
  actorRows: `SELECT id, actor, subject, detail FROM audit_log INDEXED BY audit_log_by_actor
    WHERE actor = :actor AND id >= :from_id`,
} as const;

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
  const holdStart = sql(AUDIT_ANONYMIZE_SQL.holdStart);
  const subjectRows = sql(AUDIT_ANONYMIZE_SQL.subjectRows);
  const detailRows = sql(AUDIT_ANONYMIZE_SQL.detailRows);
  const actorRows = sql(AUDIT_ANONYMIZE_SQL.actorRows);
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
  function answer(query: AuditRowQuery): AuditRowAnswer {
    switch (query.kind) {
      case "hold_start": {
        const { address, untilId } = query;
        const row = holdStart.get({ subject: `user:${address}`, until_id: untilId, actions }) as
          | Row
          | undefined;
        return row && {
          id: Number(row.id),
          action: row.action as string,
          detail: JSON.parse(row.detail as string) as Record<string, unknown>,
        };
      }
      case "subject_rows": {
        const { hold } = query;
        return (subjectRows.all({
          from_id: hold.fromId,
          until_id: hold.untilId,
          subject: `user:${hold.address}`,
        }) as Row[]).map(toRowRead);
      }
      case "detail_rows": {
        const { hold } = query;
        return (detailRows.all({
          from_id: hold.fromId,
          until_id: hold.untilId,
          actions: JSON.stringify(query.actions),
          quoted: JSON.stringify(hold.address),
        }) as Row[]).map(toRowRead);
      }
      case "actor_rows":
        return (actorRows.all({ from_id: query.fromId, actor: query.actor }) as Row[])
          .map(toRowRead);
    }
  }
  return (user, ref) => {
    const walk = walkAuditRows(user, ref);
    let step = walk.next();
    while (!step.done) step = walk.next(answer(step.value));
    const plan = step.value;
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
