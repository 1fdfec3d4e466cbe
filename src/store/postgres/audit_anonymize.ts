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

/**
 * The walk's reads (src/store/audit_anonymize.ts), each through an index (pinned by
 * tests/store/audit_anonymize_plan_test.ts): a hold's start and rows by subject through
 * `audit_log_by_subject`, rows by detail among the actions that may hold an address through
 * `audit_log_by_action_id` (the id range bounds the read of each action's entries), the user's
 * own rows through `audit_log_by_actor`. Parameters in the order of the `$n`.
 */
export const AUDIT_ANONYMIZE_SQL = {
  /** `$1` subject, `$2` until id, `$3` the actions that start a hold ({@link toTextArray}). */
  holdStart: `SELECT id, action, detail FROM audit_log
    WHERE subject = $1 AND id < $2 AND action = ANY($3::text[])
    ORDER BY id DESC LIMIT 1`,
  /** `$1` subject, `$2` from id, `$3` until id. */
  subjectRows: `SELECT id, actor, subject, detail FROM audit_log
    WHERE subject = $1 AND id >= $2 AND id < $3`,
  /** `$1` the actions ({@link toTextArray}), `$2` from id, `$3` until id, `$4` the quoted address. */
  detailRows: `SELECT id, actor, subject, detail FROM audit_log
    WHERE action = ANY($1::text[]) AND id >= $2 AND id < $3 AND strpos(detail::text, $4) > 0`,
  /** `$1` actor, `$2` from id. */
  actorRows: `SELECT id, actor, subject, detail FROM audit_log WHERE actor = $1 AND id >= $2`,
} as const;

/**
 * `values` as a `text[]` literal, for a parameter: its elements are then known to the planner
 * (the statements are planned with their parameters), which weighs the action index by them.
 * Not the driver's array parameter (`sql.array`): it needs the array types postgres.js fetches
 * on connecting, which connect.ts turns off; nor a JSON array cast in SQL (`ARRAY(SELECT
 * jsonb_array_elements_text($1))`): the planner cannot see into that subquery, and read every
 * row of the log for `detailRows`. tests/store/postgres/audit_anonymize_test.ts reads it back.
 */
export function toTextArray(values: readonly string[]): string {
  return `{${values.map((value) => `"${value.replace(/["\\]/g, "\\$&")}"`).join(",")}}`;
}

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
      const [row] = await tx.unsafe<Row[]>(AUDIT_ANONYMIZE_SQL.holdStart, [
        `user:${query.address}`,
        query.untilId,
        toTextArray(AUDIT_HOLD_STARTS),
      ]);
      return row && {
        id: Number(row.id),
        action: row.action as string,
        detail: row.detail as Record<string, unknown>,
      };
    }
    case "subject_rows": {
      const { hold } = query;
      const found = await tx.unsafe<Row[]>(AUDIT_ANONYMIZE_SQL.subjectRows, [
        `user:${hold.address}`,
        hold.fromId,
        hold.untilId,
      ]);
      return found.map(toRowRead);
    }
    case "detail_rows": {
      const { hold } = query;
      const found = await tx.unsafe<Row[]>(AUDIT_ANONYMIZE_SQL.detailRows, [
        toTextArray(query.actions),
        hold.fromId,
        hold.untilId,
        JSON.stringify(hold.address),
      ]);
      return found.map(toRowRead);
    }
    case "actor_rows": {
      const found = await tx.unsafe<Row[]>(AUDIT_ANONYMIZE_SQL.actorRows, [
        query.actor,
        query.fromId,
      ]);
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
