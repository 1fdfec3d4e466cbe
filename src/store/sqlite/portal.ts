/**
 * The developer portal's tables on SQLite (portal_schema.ts): accounts, one-time codes,
 * sessions (portal_sessions.ts) and the mail outbox (mail_outbox.ts). A write that changes a
 * user's password or enables it goes through the users table, whose triggers record the grant
 * change; the portal's own tables hold no grant, so their statements keep grants.
 *
 * @module
 */
import { StoreConflict } from "../errors.ts";
import type {
  PortalAccount,
  PortalAccountState,
  PortalCode,
  PortalCodePurpose,
  PortalStore,
} from "../store.ts";
import { toUser } from "../rows.ts";
import type { Connection, Row } from "./connection.ts";
import { createMailOutbox } from "./mail_outbox.ts";
import { createPortalSessionMethods } from "./portal_sessions.ts";

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
    ...(row.password_hash == null ? {} : { passwordHash: row.password_hash as string }),
    ...(row.network == null ? {} : { network: row.network as string }),
  };
}

/** The statements of accounts, their users and codes. */
type AccountStatements = ReturnType<typeof prepareAccountStatements>;

function prepareAccountStatements({ sql }: Connection) {
  return {
    accountFind: sql("SELECT * FROM portal_accounts WHERE user_id = :user_id"),
    // Keeps grants: a new user has no tokens, and is disabled until active.
    userInsert: sql(
      `INSERT INTO users (email, password_hash, token_timeout_seconds, disabled, created_at,
         updated_at)
       VALUES (:email, :password_hash, :timeout, :disabled, :now, :now) RETURNING *`,
      "keeps-grants",
    ),
    accountInsert: sql(
      `INSERT INTO portal_accounts (user_id, state, created_at, updated_at, user_held)
       VALUES (:user_id, :state, :now, :now, :user_held)`,
      "keeps-grants",
    ),
    // An operator's user enrolled: active, never held.
    accountEnrol: sql(
      `INSERT INTO portal_accounts (user_id, state, created_at, updated_at, user_held)
       VALUES (:user_id, 'active', :now, :now, 0) ON CONFLICT (user_id) DO NOTHING`,
      "keeps-grants",
    ),
    // Activation ends the hold; the hold is read first (userEnable).
    accountSetState: sql(
      `UPDATE portal_accounts SET state = :state, updated_at = :now,
         user_held = CASE WHEN :state = 'active' THEN 0 ELSE user_held END
       WHERE user_id = :user_id`,
      "keeps-grants",
    ),
    // Only a user the portal holds disabled: never an operator's disable (which ends the hold).
    userEnable: sql(
      `UPDATE users SET disabled = 0, updated_at = :now WHERE id = :id AND disabled = 1
         AND EXISTS (SELECT 1 FROM portal_accounts WHERE user_id = :id AND user_held = 1)`,
    ),
    userSetPassword: sql(
      "UPDATE users SET password_hash = :password_hash, updated_at = :now WHERE id = :id",
    ),
    // Keeps grants: a disabled user has none (an unverified sign-up's new password).
    userSetHeldPassword: sql(
      `UPDATE users SET password_hash = :password_hash, updated_at = :now
       WHERE id = :id AND disabled = 1`,
      "keeps-grants",
    ),
    userRaiseCutoff: sql(
      `UPDATE users SET tokens_valid_from = max(tokens_valid_from, :cutoff), updated_at = :now
       WHERE id = :id`,
    ),
    userRow: sql("SELECT tokens_valid_from FROM users WHERE id = :id"),
    tokensLatest: sql("SELECT max(issued_at) AS latest FROM tokens WHERE user_id = :id"),
    tokensLive: sql(
      `SELECT count(*) AS n FROM tokens WHERE user_id = :id AND revoked_at IS NULL
         AND expires_at > :now AND issued_at >= :from AND issued_at < :cutoff`,
    ),
    codesEnd: sql(
      `UPDATE portal_codes SET used_at = :now
       WHERE user_id = :user_id AND purpose = :purpose AND used_at IS NULL`,
      "keeps-grants",
    ),
    codeInsert: sql(
      `INSERT INTO portal_codes (user_id, purpose, code_hash, created_at, expires_at, new_email,
         password_hash, network)
       VALUES (:user_id, :purpose, :code_hash, :now, :expires_at, :new_email, :password_hash,
         :network)`,
      "keeps-grants",
    ),
    // Ends the live codes of a purpose but the newest `keep` (a new candidate is added next).
    codesEndOldest: sql(
      `UPDATE portal_codes SET used_at = :now
       WHERE user_id = :user_id AND purpose = :purpose AND used_at IS NULL
         AND id NOT IN (SELECT id FROM portal_codes WHERE user_id = :user_id
           AND purpose = :purpose AND used_at IS NULL AND expires_at > :now
           ORDER BY id DESC LIMIT :keep)`,
      "keeps-grants",
    ),
    // The same, among the live codes of one client network.
    codesEndOldestOfNetwork: sql(
      `UPDATE portal_codes SET used_at = :now
       WHERE user_id = :user_id AND purpose = :purpose AND used_at IS NULL AND network = :network
         AND id NOT IN (SELECT id FROM portal_codes WHERE user_id = :user_id
           AND purpose = :purpose AND used_at IS NULL AND expires_at > :now
           AND network = :network ORDER BY id DESC LIMIT :keep)`,
      "keeps-grants",
    ),
    codesFind: sql(
      `SELECT * FROM portal_codes WHERE user_id = :user_id AND purpose = :purpose
         AND used_at IS NULL AND expires_at > :now ORDER BY id DESC`,
    ),
    codeFind: sql(
      `SELECT * FROM portal_codes WHERE user_id = :user_id AND purpose = :purpose
         AND used_at IS NULL AND expires_at > :now ORDER BY id DESC LIMIT 1`,
    ),
    codeAttempt: sql(
      "UPDATE portal_codes SET attempts = attempts + 1 WHERE id = :id RETURNING attempts",
      "keeps-grants",
    ),
    codeUse: sql(
      `UPDATE portal_codes SET used_at = :now WHERE id = :id AND used_at IS NULL
       RETURNING user_id, new_email, password_hash`,
      "keeps-grants",
    ),
    // Alters grants: a cached grant carries the e-mail.
    userSetEmail: sql("UPDATE users SET email = :email, updated_at = :now WHERE id = :id"),
    // Keeps grants: a label is in no grant.
    keySetLabel: sql("UPDATE api_keys SET label = :label WHERE id = :id", "keeps-grants"),
    unverifiedFind: sql(
      `SELECT u.id, u.email FROM portal_accounts a JOIN users u ON u.id = a.user_id
       WHERE a.state = 'pending_verification' AND a.created_at < :before
       ORDER BY a.created_at LIMIT :limit`,
    ),
    // Alter grants (the triggers record each scope); the portal rows go by cascade. An
    // unverified user has no keys unless an operator made one: they go too, as with deleteUser.
    userTokensDelete: sql("DELETE FROM tokens WHERE user_id = :id"),
    userKeysDelete: sql("DELETE FROM api_keys WHERE user_id = :id"),
    userDelete: sql("DELETE FROM users WHERE id = :id"),
    sessionsOthersDelete: sql(
      "DELETE FROM portal_sessions WHERE user_id = :user_id AND id_hash <> :keep",
      "keeps-grants",
    ),
    sessionsOfUserDelete: sql(
      "DELETE FROM portal_sessions WHERE user_id = :user_id",
      "keeps-grants",
    ),
  };
}

/** Sets an account's state; `active` enables its user only while the portal holds it. */
function setState(
  st: AccountStatements,
  userId: number,
  state: PortalAccountState,
  now: number,
): void {
  if (state === "active") st.userEnable.run({ id: userId, now });
  st.accountSetState.run({ user_id: userId, state, now });
}

/**
 * A new password: the cutoff moves past every token so far, as `updateUserPassword` does, and
 * the user's portal sessions end (but `keepSession`). Resolves to how many live tokens ended.
 */
function replacePassword(
  st: AccountStatements,
  userId: number,
  change: { passwordHash: string; now: number; keepSession?: Uint8Array },
): number {
  const { passwordHash, now, keepSession } = change;
  st.userSetPassword.run({ id: userId, password_hash: passwordHash, now });
  const from = (st.userRow.get({ id: userId }) as Row | undefined)?.tokens_valid_from as number ??
    0;
  const { latest } = st.tokensLatest.get({ id: userId }) as { latest: number | null };
  const cutoff = Math.max(from + 1, now + 1, (latest ?? 0) + 1);
  const { n } = st.tokensLive.get({ id: userId, now, from, cutoff }) as { n: number };
  st.userRaiseCutoff.run({ id: userId, cutoff, now });
  if (keepSession === undefined) st.sessionsOfUserDelete.run({ user_id: userId });
  else st.sessionsOthersDelete.run({ user_id: userId, keep: keepSession });
  return n;
}

function toPortalAccount(row: Row): PortalAccount {
  return {
    userId: row.user_id as number,
    state: row.state as PortalAccountState,
    createdAt: row.created_at as number,
    userHeld: row.user_held === 1,
  };
}

export function createPortalStore(conn: Connection): PortalStore {
  const st = prepareAccountStatements(conn);
  const outbox = createMailOutbox(conn);
  const { queue } = outbox;
  return {
    ...outbox.methods,
    ...createPortalSessionMethods(conn),
    findPortalAccount(userId) {
      return conn.read(() => {
        const row = st.accountFind.get({ user_id: userId }) as Row | undefined;
        return row && toPortalAccount(row);
      });
    },
    insertPortalUser(user, { now, audit, state, code, mail }) {
      return conn.write(() => {
        const added = toUser(st.userInsert.get({
          email: user.email,
          password_hash: user.passwordHash,
          timeout: user.tokenTimeoutSeconds,
          disabled: state === "active" ? 0 : 1,
          now,
        }) as Row);
        const held = state === "active" ? 0 : 1;
        st.accountInsert.run({ user_id: added.id, state, now, user_held: held });
        if (code !== undefined) {
          st.codeInsert.run({
            user_id: added.id,
            purpose: code.purpose,
            code_hash: code.codeHash,
            now,
            expires_at: code.expiresAt,
            new_email: code.newEmail ?? null,
            password_hash: code.passwordHash ?? null,
            network: code.network ?? null,
          });
        }
        queue(mail, now);
        return added;
      }, audit);
    },
    async insertPortalAccount(userId, { now, audit }) {
      await conn.write(() => {
        if (Number(st.accountEnrol.run({ user_id: userId, now }).changes) === 0) {
          throw new StoreConflict("The user has a portal account already");
        }
      }, audit);
    },
    async replacePortalCode(userId, { now, audit, code, mail, passwordHash }) {
      await conn.write(() => {
        st.codesEnd.run({ user_id: userId, purpose: code.purpose, now });
        st.codeInsert.run({
          user_id: userId,
          purpose: code.purpose,
          code_hash: code.codeHash,
          now,
          expires_at: code.expiresAt,
          new_email: code.newEmail ?? null,
          password_hash: code.passwordHash ?? null,
          network: code.network ?? null,
        });
        if (passwordHash !== undefined) {
          const set = { id: userId, password_hash: passwordHash, now };
          if (Number(st.userSetHeldPassword.run(set).changes) === 0) st.userSetPassword.run(set);
        }
        queue(mail, now);
      }, audit);
    },
    async addPortalCode(userId, { now, audit, code, mail, keep, keepPerNetwork }) {
      await conn.write(() => {
        if (code.network !== undefined && keepPerNetwork !== undefined) {
          st.codesEndOldestOfNetwork.run({
            user_id: userId,
            purpose: code.purpose,
            now,
            network: code.network,
            keep: keepPerNetwork - 1,
          });
        }
        st.codesEndOldest.run({ user_id: userId, purpose: code.purpose, now, keep: keep - 1 });
        st.codeInsert.run({
          user_id: userId,
          purpose: code.purpose,
          code_hash: code.codeHash,
          now,
          expires_at: code.expiresAt,
          new_email: code.newEmail ?? null,
          password_hash: code.passwordHash ?? null,
          network: code.network ?? null,
        });
        queue(mail, now);
      }, audit);
    },
    findPortalCodes(userId, purpose, now) {
      return conn.read(() =>
        (st.codesFind.all({ user_id: userId, purpose, now }) as Row[]).map(toPortalCode)
      );
    },
    findPortalCode(userId, purpose, now) {
      return conn.read(() => {
        const row = st.codeFind.get({ user_id: userId, purpose, now }) as Row | undefined;
        return row && toPortalCode(row);
      });
    },
    recordPortalCodeAttempt(codeId, { audit }) {
      const ids = typeof codeId === "number" ? [codeId] : codeId;
      return conn.write(() => {
        const counts = ids.map((id) =>
          ((st.codeAttempt.get({ id }) as Row | undefined)?.attempts as number) ?? 0
        );
        return counts[0] ?? 0;
      }, audit);
    },
    usePortalCode(codeId, { now, audit, state, passwordHash, mail, changeEmail }) {
      return conn.write(() => {
        const used = st.codeUse.get({ id: codeId, now }) as Row | undefined;
        if (used === undefined) throw new StoreConflict("The code was used meanwhile");
        const userId = used.user_id as number;
        if (changeEmail) {
          if (used.new_email === null) throw new StoreConflict("The code changes no e-mail");
          // A unique violation (the address taken meanwhile) rolls everything back.
          st.userSetEmail.run({ id: userId, email: used.new_email as string, now });
        }
        if (used.password_hash !== null) {
          st.userSetPassword.run({ id: userId, password_hash: used.password_hash as string, now });
        }
        if (state !== undefined) setState(st, userId, state, now);
        const ended = passwordHash === undefined
          ? 0
          : replacePassword(st, userId, { passwordHash, now });
        if (mail !== undefined) queue(mail, now);
        return ended;
      }, audit);
    },
    async updatePortalState(userId, { now, audit, state, mail }) {
      await conn.write(() => {
        setState(st, userId, state, now);
        if (mail !== undefined) queue(mail, now);
      }, audit);
    },
    updatePortalPassword(userId, { now, audit, passwordHash, mail, keepSession }) {
      return conn.write(() => {
        const ended = replacePassword(st, userId, { passwordHash, now, keepSession });
        queue(mail, now);
        return ended;
      }, audit);
    },
    async updateApiKeyLabel(keyId, { label, audit }) {
      await conn.write(() => {
        st.keySetLabel.run({ id: keyId, label });
      }, audit);
    },
    deleteUnverifiedPortalUsers(before, { limit, audit }) {
      return conn.write(() => {
        const found = st.unverifiedFind.all({ before, limit }) as Row[];
        for (const row of found) {
          st.userTokensDelete.run({ id: row.id });
          st.userKeysDelete.run({ id: row.id });
          st.userDelete.run({ id: row.id });
        }
        return found.map((row) => row.email as string);
      }, audit);
    },
  };
}
