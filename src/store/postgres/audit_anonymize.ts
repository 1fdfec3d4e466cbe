/**
 * Making a deleted user's audit rows anonymous on PostgreSQL (src/store/audit_anonymize.ts),
 * inside the delete's transaction, and its mail in the outbox gone.
 *
 * The append-only trigger (portal_schema.ts, `PORTAL_REDACT_SQL`) lets an update through only
 * while `audit_redact` holds a row written by the current transaction (`xact` =
 * `pg_current_xact_id()`): this function writes it first and deletes it last, so the exception
 * never outlives the delete (a setting could be set by any session, and kept).
 *
 * @module
 */
import type postgres from "postgres";
import {
  AUDIT_HOLD_STARTS,
  type AuditRowAnswer,
  type AuditRowQuery,
  type AuditRowRead,
  walkAuditRows,
} from "../audit_anonymize.ts";
import type { Row } from "../rows.ts";

function toRowRead(row: Row): AuditRowRead {
  return {
    id: Number(row.id),
    actor: row.actor as string,
    subject: row.subject as string,
    detail: row.detail as Record<string, unknown>,
  };
}

async function answer(
  tx: postgres.TransactionSql,
  query: AuditRowQuery,
): Promise<AuditRowAnswer> {
  switch (query.kind) {
    case "hold_start": {
      const [row] = await tx<Row[]>`SELECT id, action, detail FROM audit_log
        WHERE subject = ${`user:${query.address}`} AND id < ${query.untilId}
          AND action IN ${tx(AUDIT_HOLD_STARTS)}
        ORDER BY id DESC LIMIT 1`;
      return row && {
        id: Number(row.id),
        action: row.action as string,
        detail: row.detail as Record<string, unknown>,
      };
    }
    case "held_rows": {
      const { hold } = query;
      const found = await tx<Row[]>`SELECT id, actor, subject, detail FROM audit_log
        WHERE id >= ${hold.fromId} AND id < ${hold.untilId}
          AND (subject = ${`user:${hold.address}`}
            OR strpos(detail::text, ${JSON.stringify(hold.address)}) > 0)`;
      return found.map(toRowRead);
    }
    case "actor_rows": {
      const found = await tx<Row[]>`SELECT id, actor, subject, detail FROM audit_log
        WHERE id >= ${query.fromId} AND actor = ${query.actor}`;
      return found.map(toRowRead);
    }
  }
}

/** Renames the user's rows to `ref` (see @module); resolves to how many took it as subject. */
export async function anonymizeAudit(
  tx: postgres.TransactionSql,
  user: { id: number; email: string; actor?: string },
  ref: string,
): Promise<number> {
  const walk = walkAuditRows(user, ref);
  let step = walk.next();
  while (!step.done) step = walk.next(await answer(tx, step.value));
  const plan = step.value;
  await tx`INSERT INTO audit_redact (ref) VALUES (${ref})`;
  for (const { id, subject, detail } of plan.rewrites) {
    await tx`UPDATE audit_log SET subject = ${subject}, detail = ${
      tx.json(detail as postgres.JSONValue)
    }
      WHERE id = ${id}`;
  }
  await tx`DELETE FROM audit_redact WHERE xact = pg_current_xact_id()`;
  // Mail to an address another user holds now may be theirs: it stays.
  for (const address of plan.addresses) {
    await tx`DELETE FROM mail_outbox WHERE recipient = ${address}
      AND NOT EXISTS (SELECT 1 FROM users WHERE email = ${address} AND id <> ${user.id})`;
  }
  return plan.renamed;
}
