/**
 * The portal's mail outbox on PostgreSQL, a helper of portal.ts (which returns `PortalStore`):
 * queueing a message inside another write's transaction, and the mailer's claim (`SKIP
 * LOCKED`: two instances claim different messages), sent, failed and count statements. A
 * message's body, which may hold a code, is cleared once it is sent or given up.
 *
 * @module
 */
import type postgres from "postgres";
import type { GrantScope, NewMail, OutboxMail, PortalStore } from "../store.ts";
import type { Row } from "../rows.ts";
import type { PgContext } from "./db.ts";
import { holdUser } from "./user_lock.ts";

/** The outbox's methods of the portal's group. */
export type MailOutboxMethods = Pick<
  PortalStore,
  "insertMail" | "claimMail" | "markMailSent" | "markMailFailed" | "countMail"
>;

const NONE: readonly GrantScope[] = [];

function toOutboxMail(row: Row): OutboxMail {
  return {
    id: Number(row.id),
    recipient: row.recipient as string,
    subject: row.subject as string,
    text: row.body as string,
    createdAt: Number(row.created_at),
    attempts: Number(row.attempts),
  };
}

/** Queues `mail` in the transaction of the write under way. */
export async function queue(
  tx: postgres.TransactionSql,
  mail: NewMail,
  now: number,
): Promise<void> {
  await tx`INSERT INTO mail_outbox (recipient, subject, body, created_at, next_attempt_at)
    VALUES (${mail.recipient}, ${mail.subject}, ${mail.text}, ${now}, ${now})`;
}

/** The outbox's methods on `db`; the outbox holds no grant, so no write ends one. */
export function createMailOutboxMethods(db: PgContext): MailOutboxMethods {
  return {
    async insertMail(mail, { now, audit, ofUser }) {
      await db.write(async (tx) => {
        await holdUser(tx, ofUser);
        await queue(tx, mail, now);
      }, { audit, ends: () => NONE });
    },
    claimMail(now, { limit, leaseMs }) {
      return db.write(async (tx) => {
        // SKIP LOCKED: two instances sending at once claim different messages.
        const rows = await tx<Row[]>`
          UPDATE mail_outbox SET attempts = attempts + 1, next_attempt_at = ${now + leaseMs}
          WHERE id IN (
            SELECT id FROM mail_outbox WHERE next_attempt_at IS NOT NULL
              AND next_attempt_at <= ${now}
            ORDER BY next_attempt_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)
          RETURNING *`;
        return rows.map(toOutboxMail).sort((a, b) => a.id - b.id);
      }, { ends: () => NONE });
    },
    async markMailSent(id, now) {
      await db.write(async (tx) => {
        await tx`UPDATE mail_outbox SET sent_at = ${now}, next_attempt_at = NULL, body = '',
          last_error = NULL WHERE id = ${id}`;
      }, { ends: () => NONE });
    },
    async markMailFailed(id, { nextAttemptAt, error }) {
      await db.write(async (tx) => {
        // Given up: the body, which may hold a code, goes as it does once sent.
        await tx`UPDATE mail_outbox SET next_attempt_at = ${nextAttemptAt},
          last_error = ${error.slice(0, 500)}, failures = failures + 1,
          body = CASE WHEN ${nextAttemptAt === null} THEN '' ELSE body END
          WHERE id = ${id}`;
      }, { ends: () => NONE });
    },
    async countMail() {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT count(*) FILTER (WHERE next_attempt_at IS NOT NULL) AS pending,
            count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent,
            count(*) FILTER (WHERE sent_at IS NULL AND next_attempt_at IS NULL) AS given_up,
            coalesce(sum(failures), 0) AS failed
          FROM mail_outbox`
      );
      return {
        pending: Number(row.pending),
        sent: Number(row.sent),
        givenUp: Number(row.given_up),
        failedAttempts: Number(row.failed),
      };
    },
  };
}
