/**
 * Making a deleted user's earlier audit rows anonymous on PostgreSQL
 * (src/store/audit_anonymize.ts), inside the delete's transaction: the append-only trigger lets
 * an update through only while `keygate.audit_redact` (local to the transaction) is the row's
 * new subject, and only of `subject` and `detail`.
 *
 * @module
 */
import type postgres from "postgres";
import { addAuditAddresses, startAuditAddresses } from "../audit_anonymize.ts";
import type { Row } from "../rows.ts";

/** Renames the rows of `email` (and its former addresses) to `ref`; resolves to how many. */
export async function anonymizeAudit(
  tx: postgres.TransactionSql,
  email: string,
  ref: string,
): Promise<number> {
  const found = startAuditAddresses(email);
  for (let i = 0; i < found.own.length; i++) {
    const rows = await tx<Row[]>`SELECT action, detail FROM audit_log
      WHERE subject = ${`user:${found.own[i]}`} AND strpos(detail::text, '@') > 0`;
    addAuditAddresses(
      found,
      rows.map((row) => ({
        action: row.action as string,
        detail: row.detail as Record<string, unknown>,
      })),
    );
  }
  await tx`SELECT set_config('keygate.audit_redact', ${ref}, true)`;
  const subjects = found.own.map((address) => `user:${address}`);
  const renamed = await tx`UPDATE audit_log SET subject = ${ref} WHERE subject IN ${tx(subjects)}`;
  for (const address of found.all) {
    const quoted = JSON.stringify(address);
    await tx`UPDATE audit_log
      SET detail = replace(detail::text, ${quoted}, ${JSON.stringify(ref)})::jsonb
      WHERE subject = ${ref} AND strpos(detail::text, ${quoted}) > 0`;
  }
  await tx`SELECT set_config('keygate.audit_redact', '', true)`;
  return renamed.count;
}
