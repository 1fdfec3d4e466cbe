/**
 * The portal's mail outbox on SQLite, a helper of portal.ts (which returns `PortalStore`):
 * queueing a message inside another write's transaction, and the mailer's claim, sent, failed
 * and count statements. A message's body, which may hold a code, is cleared once it is sent or
 * given up.
 *
 * @module
 */
import type { MailCounts, NewMail, OutboxMail, PortalStore } from "../store.ts";
import type { Connection, Row } from "./connection.ts";
import { createUserCheck } from "./user_check.ts";

/** The outbox's methods of the portal's group. */
export type MailOutboxMethods = Pick<
  PortalStore,
  "insertMail" | "claimMail" | "markMailSent" | "markMailFailed" | "countMail"
>;

/** The outbox: `queue` for a write under way (inside its transaction), and its own methods. */
export interface SqliteMailOutbox {
  queue(mail: NewMail, now: number): void;
  methods: MailOutboxMethods;
}

function toOutboxMail(row: Row): OutboxMail {
  return {
    id: row.id as number,
    recipient: row.recipient as string,
    subject: row.subject as string,
    text: row.body as string,
    createdAt: row.created_at as number,
    attempts: row.attempts as number,
  };
}

/** Prepares the outbox's statements on `conn`. */
export function createMailOutbox(conn: Connection): SqliteMailOutbox {
  const { sql } = conn;
  const requireUser = createUserCheck(conn);
  // The outbox holds no grant: every statement keeps grants.
  const mailInsert = sql(
    `INSERT INTO mail_outbox (recipient, subject, body, created_at, next_attempt_at)
     VALUES (:recipient, :subject, :body, :now, :now)`,
    "keeps-grants",
  );
  const mailDue = sql(
    `SELECT * FROM mail_outbox WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= :now
     ORDER BY next_attempt_at, id LIMIT :limit`,
  );
  const mailClaim = sql(
    `UPDATE mail_outbox SET attempts = attempts + 1, next_attempt_at = :until WHERE id = :id
     RETURNING *`,
    "keeps-grants",
  );
  const mailSent = sql(
    `UPDATE mail_outbox SET sent_at = :now, next_attempt_at = NULL, body = '', last_error = NULL
     WHERE id = :id`,
    "keeps-grants",
  );
  // Given up (`:next` NULL): the body, which may hold a code, goes as it does once sent.
  const mailFailed = sql(
    `UPDATE mail_outbox SET next_attempt_at = :next, last_error = :error, failures = failures + 1,
       body = CASE WHEN :next IS NULL THEN '' ELSE body END
     WHERE id = :id`,
    "keeps-grants",
  );
  const mailCounts = sql(
    `SELECT count(*) FILTER (WHERE next_attempt_at IS NOT NULL) AS pending,
       count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent,
       count(*) FILTER (WHERE sent_at IS NULL AND next_attempt_at IS NULL) AS given_up,
       coalesce(sum(failures), 0) AS failed
     FROM mail_outbox`,
  );

  function queue(mail: NewMail, now: number): void {
    mailInsert.run({ recipient: mail.recipient, subject: mail.subject, body: mail.text, now });
  }

  return {
    queue,
    methods: {
      async insertMail(mail, { now, audit, ofUser }) {
        await conn.write(() => {
          requireUser(ofUser);
          queue(mail, now);
        }, audit);
      },
      claimMail(now, { limit, leaseMs }) {
        return conn.write(() =>
          (mailDue.all({ now, limit }) as Row[]).map((due) =>
            toOutboxMail(mailClaim.get({ id: due.id, until: now + leaseMs }) as Row)
          )
        );
      },
      async markMailSent(id, now) {
        await conn.write(() => mailSent.run({ id, now }));
      },
      async markMailFailed(id, { nextAttemptAt, error }) {
        await conn.write(() =>
          mailFailed.run({ id, next: nextAttemptAt, error: error.slice(0, 500) })
        );
      },
      countMail() {
        return conn.read(() => {
          const row = mailCounts.get() as Row;
          return {
            pending: row.pending as number,
            sent: row.sent as number,
            givenUp: row.given_up as number,
            failedAttempts: row.failed as number,
          } satisfies MailCounts;
        });
      },
    },
  };
}
