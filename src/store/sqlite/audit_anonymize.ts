/**
 * Making a deleted user's earlier audit rows anonymous on SQLite (src/store/audit_anonymize.ts),
 * inside the delete's transaction: the append-only trigger lets an update through only while
 * `audit_redact` holds the row's new subject, and only of `subject` and `detail`.
 *
 * @module
 */
import { addAuditAddresses, startAuditAddresses } from "../audit_anonymize.ts";
import type { Connection, Row } from "./connection.ts";

/** Binds the statements; the function runs inside a write and resolves to the rows renamed. */
export function createAuditAnonymizer(conn: Connection): (email: string, ref: string) => number {
  const { sql } = conn;
  const rowsWithAddress = sql(
    `SELECT action, detail FROM audit_log WHERE subject = :subject AND instr(detail, '@') > 0`,
  );
  const open = sql("INSERT INTO audit_redact (user_ref) VALUES (:ref)", "keeps-grants");
  const rename = sql(
    "UPDATE audit_log SET subject = :ref WHERE subject = :subject",
    "keeps-grants",
  );
  const replace = sql(
    `UPDATE audit_log SET detail = replace(detail, :quoted, :ref_quoted)
     WHERE subject = :ref AND instr(detail, :quoted) > 0`,
    "keeps-grants",
  );
  const close = sql("DELETE FROM audit_redact", "keeps-grants");
  return (email, ref) => {
    const found = startAuditAddresses(email);
    for (let i = 0; i < found.own.length; i++) {
      const rows = rowsWithAddress.all({ subject: `user:${found.own[i]}` }) as Row[];
      addAuditAddresses(
        found,
        rows.map((row) => ({
          action: row.action as string,
          detail: JSON.parse(row.detail as string) as Record<string, unknown>,
        })),
      );
    }
    open.run({ ref });
    let renamed = 0;
    for (const address of found.own) {
      renamed += Number(rename.run({ ref, subject: `user:${address}` }).changes);
    }
    for (const address of found.all) {
      replace.run({ ref, quoted: JSON.stringify(address), ref_quoted: JSON.stringify(ref) });
    }
    close.run({});
    return renamed;
  };
}
