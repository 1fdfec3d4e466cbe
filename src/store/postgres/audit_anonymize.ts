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
  type AddressHold,
  AUDIT_HOLD_STARTS,
  AUDIT_ID_END,
  type AuditRowRead,
  MAX_ADDRESS_HOLDS,
  planAuditRewrites,
  toAddressHold,
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

/** Renames the user's rows to `ref` (see @module); resolves to how many took it as subject. */
export async function anonymizeAudit(
  tx: postgres.TransactionSql,
  user: { id: number; email: string; actor?: string },
  ref: string,
): Promise<number> {
  const holds: AddressHold[] = [];
  let next: { address: string; untilId: number } | undefined = {
    address: user.email,
    untilId: AUDIT_ID_END,
  };
  while (next !== undefined && holds.length < MAX_ADDRESS_HOLDS) {
    const [row] = await tx<Row[]>`SELECT id, action, detail FROM audit_log
      WHERE subject = ${`user:${next.address}`} AND id < ${next.untilId}
        AND action IN ${tx(AUDIT_HOLD_STARTS)}
      ORDER BY id DESC LIMIT 1`;
    const start = row && {
      id: Number(row.id),
      action: row.action as string,
      detail: row.detail as Record<string, unknown>,
    };
    const step = toAddressHold(next.address, next.untilId, start);
    holds.push(step.hold);
    next = step.before;
  }
  const rows = new Map<number, AuditRowRead>();
  for (const hold of holds) {
    const found = await tx<Row[]>`SELECT id, actor, subject, detail FROM audit_log
      WHERE id >= ${hold.fromId} AND id < ${hold.untilId}
        AND (subject = ${`user:${hold.address}`}
          OR strpos(detail::text, ${JSON.stringify(hold.address)}) > 0)`;
    for (const row of found) rows.set(Number(row.id), toRowRead(row));
  }
  if (user.actor !== undefined) {
    const fromId = Math.min(...holds.map((hold) => hold.fromId));
    const found = await tx<Row[]>`SELECT id, actor, subject, detail FROM audit_log
      WHERE id >= ${fromId} AND actor = ${user.actor}`;
    for (const row of found) rows.set(Number(row.id), toRowRead(row));
  }
  const plan = planAuditRewrites([...rows.values()], { holds, actor: user.actor, ref });
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
