/**
 * The developer portal's tables on SQLite (portal_schema.ts): accounts, one-time codes,
 * sessions and the mail outbox. A write that changes a user's password or enables it goes
 * through the users table, whose triggers record the grant change; the portal's own tables
 * hold no grant, so their statements keep grants.
 *
 * @module
 */
import { StoreConflict } from "../errors.ts";
import type {
  MailCounts,
  NewMail,
  OutboxMail,
  PortalAccount,
  PortalAccountState,
  PortalCode,
  PortalCodePurpose,
  PortalStore,
} from "../store.ts";
import { toUser } from "../rows.ts";
import type { Connection, Row } from "./connection.ts";

function toPortalCode(row: Row): PortalCode {
  return {
    id: row.id as number,
    userId: row.user_id as number,
    purpose: row.purpose as PortalCodePurpose,
    codeHash: new Uint8Array(row.code_hash as Uint8Array),
    createdAt: row.created_at as number,
    expiresAt: row.expires_at as number,
    attempts: row.attempts as number,
    usedAt: row.used_at as number | null,
    ...(row.new_email === null ? {} : { newEmail: row.new_email as string }),
  };
}

export function createPortalStore(conn: Connection): PortalStore {
  const { sql } = conn;
  const accountFind = sql("SELECT * FROM portal_accounts WHERE user_id = :user_id");
  // Keeps grants: a new user has no tokens, and is disabled until active.
  const userInsert = sql(
    `INSERT INTO users (email, password_hash, token_timeout_seconds, disabled, created_at,
       updated_at)
     VALUES (:email, :password_hash, :timeout, :disabled, :now, :now) RETURNING *`,
    "keeps-grants",
  );
  const accountInsert = sql(
    `INSERT INTO portal_accounts (user_id, state, created_at, updated_at, user_held)
     VALUES (:user_id, :state, :now, :now, :user_held)`,
    "keeps-grants",
  );
  // Activation ends the hold; the hold is read first (userEnable).
  const accountSetState = sql(
    `UPDATE portal_accounts SET state = :state, updated_at = :now,
       user_held = CASE WHEN :state = 'active' THEN 0 ELSE user_held END
     WHERE user_id = :user_id`,
    "keeps-grants",
  );
  // Only a user the portal holds disabled: never an operator's disable (which ends the hold).
  const userEnable = sql(
    `UPDATE users SET disabled = 0, updated_at = :now WHERE id = :id AND disabled = 1
       AND EXISTS (SELECT 1 FROM portal_accounts WHERE user_id = :id AND user_held = 1)`,
  );
  const userSetPassword = sql(
    "UPDATE users SET password_hash = :password_hash, updated_at = :now WHERE id = :id",
  );
  const userRaiseCutoff = sql(
    `UPDATE users SET tokens_valid_from = max(tokens_valid_from, :cutoff), updated_at = :now
     WHERE id = :id`,
  );
  const userRow = sql("SELECT tokens_valid_from FROM users WHERE id = :id");
  const tokensLatest = sql("SELECT max(issued_at) AS latest FROM tokens WHERE user_id = :id");
  const tokensLive = sql(
    `SELECT count(*) AS n FROM tokens WHERE user_id = :id AND revoked_at IS NULL
       AND expires_at > :now AND issued_at >= :from AND issued_at < :cutoff`,
  );
  const codesEnd = sql(
    `UPDATE portal_codes SET used_at = :now
     WHERE user_id = :user_id AND purpose = :purpose AND used_at IS NULL`,
    "keeps-grants",
  );
  const codeInsert = sql(
    `INSERT INTO portal_codes (user_id, purpose, code_hash, created_at, expires_at, new_email)
     VALUES (:user_id, :purpose, :code_hash, :now, :expires_at, :new_email)`,
    "keeps-grants",
  );
  const codeFind = sql(
    `SELECT * FROM portal_codes WHERE user_id = :user_id AND purpose = :purpose
       AND used_at IS NULL AND expires_at > :now ORDER BY id DESC LIMIT 1`,
  );
  const codeAttempt = sql(
    "UPDATE portal_codes SET attempts = attempts + 1 WHERE id = :id RETURNING attempts",
    "keeps-grants",
  );
  const codeUse = sql(
    `UPDATE portal_codes SET used_at = :now WHERE id = :id AND used_at IS NULL
     RETURNING user_id, new_email`,
    "keeps-grants",
  );
  // Alters grants: a cached grant carries the e-mail.
  const userSetEmail = sql("UPDATE users SET email = :email, updated_at = :now WHERE id = :id");
  // Keeps grants: a label is in no grant.
  const keySetLabel = sql("UPDATE api_keys SET label = :label WHERE id = :id", "keeps-grants");
  const mailCounts = sql(
    `SELECT count(*) FILTER (WHERE next_attempt_at IS NOT NULL) AS pending,
       count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent,
       count(*) FILTER (WHERE sent_at IS NULL AND next_attempt_at IS NULL) AS given_up,
       coalesce(sum(failures), 0) AS failed
     FROM mail_outbox`,
  );
  const unverifiedFind = sql(
    `SELECT u.id, u.email FROM portal_accounts a JOIN users u ON u.id = a.user_id
     WHERE a.state = 'pending_verification' AND a.created_at < :before
     ORDER BY a.created_at LIMIT :limit`,
  );
  // Alter grants (the triggers record each scope); the portal rows go by cascade. An unverified
  // user has no keys unless an operator made one: they go too, as with deleteUser.
  const userTokensDelete = sql("DELETE FROM tokens WHERE user_id = :id");
  const userKeysDelete = sql("DELETE FROM api_keys WHERE user_id = :id");
  const userDelete = sql("DELETE FROM users WHERE id = :id");
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
  const mailQueued = sql(
    "SELECT count(*) AS n FROM mail_outbox WHERE next_attempt_at IS NOT NULL",
  );
  const sessionInsert = sql(
    `INSERT INTO portal_sessions (id_hash, user_id, created_at, expires_at)
     VALUES (:id_hash, :user_id, :now, :expires_at)`,
    "keeps-grants",
  );
  const sessionsPrune = sql(
    `DELETE FROM portal_sessions WHERE id_hash IN (
       SELECT id_hash FROM portal_sessions WHERE expires_at <= :now LIMIT 100)`,
    "keeps-grants",
  );
  const sessionFind = sql(
    "SELECT * FROM portal_sessions WHERE id_hash = :id_hash AND expires_at > :now",
  );
  const sessionDelete = sql("DELETE FROM portal_sessions WHERE id_hash = :id_hash", "keeps-grants");
  const sessionsOthersDelete = sql(
    "DELETE FROM portal_sessions WHERE user_id = :user_id AND id_hash <> :keep",
    "keeps-grants",
  );
  const sessionsOfUserDelete = sql(
    "DELETE FROM portal_sessions WHERE user_id = :user_id",
    "keeps-grants",
  );

  function queue(mail: NewMail, now: number): void {
    mailInsert.run({ recipient: mail.recipient, subject: mail.subject, body: mail.text, now });
  }

  function setState(userId: number, state: PortalAccountState, now: number): void {
    if (state === "active") userEnable.run({ id: userId, now });
    accountSetState.run({ user_id: userId, state, now });
  }

  /** New password: the cutoff moves past every token so far, as `updateUserPassword` does. */
  function replacePassword(
    userId: number,
    passwordHash: string,
    now: number,
    keepSession?: Uint8Array,
  ): number {
    userSetPassword.run({ id: userId, password_hash: passwordHash, now });
    const from = (userRow.get({ id: userId }) as Row | undefined)?.tokens_valid_from as number ??
      0;
    const { latest } = tokensLatest.get({ id: userId }) as { latest: number | null };
    const cutoff = Math.max(from + 1, now + 1, (latest ?? 0) + 1);
    const { n } = tokensLive.get({ id: userId, now, from, cutoff }) as { n: number };
    userRaiseCutoff.run({ id: userId, cutoff, now });
    if (keepSession === undefined) sessionsOfUserDelete.run({ user_id: userId });
    else sessionsOthersDelete.run({ user_id: userId, keep: keepSession });
    return n;
  }

  return {
    findPortalAccount(userId) {
      return conn.read(() => {
        const row = accountFind.get({ user_id: userId }) as Row | undefined;
        return row && {
          userId: row.user_id as number,
          state: row.state as PortalAccountState,
          createdAt: row.created_at as number,
          userHeld: row.user_held === 1,
        } satisfies PortalAccount;
      });
    },
    insertPortalUser(user, { now, audit, state, code, mail }) {
      return conn.write(() => {
        const row = userInsert.get({
          email: user.email,
          password_hash: user.passwordHash,
          timeout: user.tokenTimeoutSeconds,
          disabled: state === "active" ? 0 : 1,
          now,
        }) as Row;
        const added = toUser(row);
        accountInsert.run({ user_id: added.id, state, now, user_held: state === "active" ? 0 : 1 });
        if (code !== undefined) {
          codeInsert.run({
            user_id: added.id,
            purpose: code.purpose,
            code_hash: code.codeHash,
            now,
            expires_at: code.expiresAt,
          });
        }
        queue(mail, now);
        return added;
      }, audit);
    },
    async replacePortalCode(userId, { now, audit, code, mail, passwordHash }) {
      await conn.write(() => {
        codesEnd.run({ user_id: userId, purpose: code.purpose, now });
        codeInsert.run({
          user_id: userId,
          purpose: code.purpose,
          code_hash: code.codeHash,
          now,
          expires_at: code.expiresAt,
          new_email: code.newEmail ?? null,
        });
        if (passwordHash !== undefined) {
          userSetPassword.run({ id: userId, password_hash: passwordHash, now });
        }
        queue(mail, now);
      }, audit);
    },
    async insertMail(mail, { now, audit }) {
      await conn.write(() => queue(mail, now), audit);
    },
    findPortalCode(userId, purpose, now) {
      return conn.read(() => {
        const row = codeFind.get({ user_id: userId, purpose, now }) as Row | undefined;
        return row && toPortalCode(row);
      });
    },
    recordPortalCodeAttempt(codeId, { audit }) {
      return conn.write(
        () => ((codeAttempt.get({ id: codeId }) as Row | undefined)?.attempts as number) ?? 0,
        audit,
      );
    },
    usePortalCode(codeId, { now, audit, state, passwordHash, mail, changeEmail }) {
      return conn.write(() => {
        const used = codeUse.get({ id: codeId, now }) as Row | undefined;
        if (used === undefined) throw new StoreConflict("The code was used meanwhile");
        const userId = used.user_id as number;
        if (changeEmail) {
          if (used.new_email === null) throw new StoreConflict("The code changes no e-mail");
          // A unique violation (the address taken meanwhile) rolls everything back.
          userSetEmail.run({ id: userId, email: used.new_email as string, now });
        }
        if (state !== undefined) setState(userId, state, now);
        const ended = passwordHash === undefined ? 0 : replacePassword(userId, passwordHash, now);
        if (mail !== undefined) queue(mail, now);
        return ended;
      }, audit);
    },
    async updatePortalState(userId, { now, audit, state, mail }) {
      await conn.write(() => {
        setState(userId, state, now);
        if (mail !== undefined) queue(mail, now);
      }, audit);
    },
    async insertPortalSession(idHash, { now, audit, userId, expiresAt }) {
      await conn.write(() => {
        sessionsPrune.run({ now });
        sessionInsert.run({ id_hash: idHash, user_id: userId, now, expires_at: expiresAt });
      }, audit);
    },
    findPortalSession(idHash, now) {
      return conn.read(() => {
        const row = sessionFind.get({ id_hash: idHash, now }) as Row | undefined;
        return row && {
          userId: row.user_id as number,
          createdAt: row.created_at as number,
          expiresAt: row.expires_at as number,
        };
      });
    },
    deletePortalSession(idHash, { audit }) {
      return conn.write(() => Number(sessionDelete.run({ id_hash: idHash }).changes) === 1, audit);
    },
    claimMail(now, { limit, leaseMs }) {
      return conn.write(() =>
        (mailDue.all({ now, limit }) as Row[]).map((due) => {
          const row = mailClaim.get({ id: due.id, until: now + leaseMs }) as Row;
          return {
            id: row.id as number,
            recipient: row.recipient as string,
            subject: row.subject as string,
            text: row.body as string,
            createdAt: row.created_at as number,
            attempts: row.attempts as number,
          } satisfies OutboxMail;
        })
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
    countQueuedMail() {
      return conn.read(() => (mailQueued.get() as { n: number }).n);
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
    updatePortalPassword(userId, { now, audit, passwordHash, mail, keepSession }) {
      return conn.write(() => {
        const ended = replacePassword(userId, passwordHash, now, keepSession);
        queue(mail, now);
        return ended;
      }, audit);
    },
    async updateApiKeyLabel(keyId, { label, audit }) {
      await conn.write(() => {
        keySetLabel.run({ id: keyId, label });
      }, audit);
    },
    deleteUnverifiedPortalUsers(before, { limit, audit }) {
      return conn.write(() => {
        const found = unverifiedFind.all({ before, limit }) as Row[];
        for (const row of found) {
          userTokensDelete.run({ id: row.id });
          userKeysDelete.run({ id: row.id });
          userDelete.run({ id: row.id });
        }
        return found.map((row) => row.email as string);
      }, audit);
    },
  };
}
