/**
 * The developer portal's tables on PostgreSQL (portal_schema.ts): accounts, one-time codes,
 * sessions (portal_sessions.ts) and the mail outbox (mail_outbox.ts), with the same rules as on
 * SQLite (sqlite/portal.ts). A write that enables a user or replaces its password records the
 * user's grant change.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreConflict } from "../errors.ts";
import type {
  DeletedPortalUser,
  DeletedUser,
  GrantScope,
  NewPortalCode,
  NewUser,
  PortalAccountState,
  PortalCode,
  PortalCodePurpose,
  PortalStore,
  User,
} from "../store.ts";
import { type Row, toPortalAccount, toUser } from "../rows.ts";
import type { PgContext } from "./db.ts";
import { createMailOutboxMethods, queue } from "./mail_outbox.ts";
import { createPortalSessionMethods } from "./portal_sessions.ts";
import { raiseCutoff } from "./user_cutoff.ts";
import { holdUser, lockUser } from "./user_lock.ts";
import { deleteUserRows } from "./user_deletion.ts";

function toPortalCode(row: Row): PortalCode {
  return {
    id: Number(row.id),
    userId: Number(row.user_id),
    purpose: row.purpose as PortalCodePurpose,
    codeHash: new Uint8Array(row.code_hash as Uint8Array),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    attempts: Number(row.attempts),
    usedAt: row.used_at === null ? null : Number(row.used_at),
    ...(row.new_email === null ? {} : { newEmail: row.new_email as string }),
    ...(row.password_hash == null ? {} : { passwordHash: row.password_hash as string }),
    ...(row.network == null ? {} : { network: row.network as string }),
  };
}

async function setState(
  tx: postgres.TransactionSql,
  userId: number,
  state: PortalAccountState,
  now: number,
): Promise<void> {
  if (state === "active") {
    // Only a user the portal holds disabled: never an operator's disable (which ends the hold).
    await tx`UPDATE users SET disabled = 0, updated_at = ${now} WHERE id = ${userId} AND disabled = 1
      AND EXISTS (SELECT 1 FROM portal_accounts WHERE user_id = ${userId} AND user_held = 1)`;
  }
  await tx`UPDATE portal_accounts SET state = ${state}, updated_at = ${now},
      user_held = CASE WHEN ${state} = 'active' THEN 0 ELSE user_held END
    WHERE user_id = ${userId}`;
}

/** A new user (disabled, and held by the portal, unless `active`) with its portal account. */
async function insertUserAndAccount(
  tx: postgres.TransactionSql,
  user: NewUser,
  { now, state }: { now: number; state: PortalAccountState },
): Promise<User> {
  const held = state === "active" ? 0 : 1;
  const [row] = await tx<Row[]>`
    INSERT INTO users (email, password_hash, token_timeout_seconds, disabled, created_at,
      updated_at)
    VALUES (${user.email}, ${user.passwordHash}, ${user.tokenTimeoutSeconds}, ${held}, ${now},
      ${now})
    RETURNING *`;
  const added = toUser(row);
  await tx`INSERT INTO portal_accounts (user_id, state, created_at, updated_at, user_held)
    VALUES (${added.id}, ${state}, ${now}, ${now}, ${held})`;
  return added;
}

async function insertCode(
  tx: postgres.TransactionSql,
  userId: number,
  code: NewPortalCode,
  now: number,
): Promise<void> {
  await tx`INSERT INTO portal_codes (user_id, purpose, code_hash, created_at, expires_at,
      new_email, password_hash, network)
    VALUES (${userId}, ${code.purpose}, ${code.codeHash}, ${now}, ${code.expiresAt},
      ${code.newEmail ?? null}, ${code.passwordHash ?? null}, ${code.network ?? null})`;
}

/**
 * Marks a code used and, with `changeEmail`, gives its user the code's address; resolves to
 * the user's id. @throws {StoreConflict} when it was used meanwhile (or changes no e-mail).
 */
async function spendCode(
  tx: postgres.TransactionSql,
  codeId: number,
  { now, changeEmail }: { now: number; changeEmail?: boolean },
): Promise<number> {
  // The user before the code (lockUser): a janitor's or a refusal's deletion locks the user,
  // then deletes the codes.
  const [code] = await tx<Row[]>`SELECT user_id FROM portal_codes WHERE id = ${codeId}`;
  if (code === undefined) throw new StoreConflict("The code was used meanwhile");
  await lockUser(tx, Number(code.user_id));
  const [used] = await tx<Row[]>`UPDATE portal_codes SET used_at = ${now}
    WHERE id = ${codeId} AND used_at IS NULL RETURNING user_id, new_email, password_hash`;
  if (used === undefined) throw new StoreConflict("The code was used meanwhile");
  const userId = Number(used.user_id);
  if (used.password_hash !== null) {
    // The sign-up's own pending password (a verification code's candidate).
    await tx`UPDATE users SET password_hash = ${used.password_hash as string}, updated_at = ${now}
      WHERE id = ${userId}`;
  }
  if (changeEmail) {
    if (used.new_email === null) throw new StoreConflict("The code changes no e-mail");
    // A unique violation (the address taken meanwhile) rolls everything back.
    await tx`UPDATE users SET email = ${used.new_email as string}, updated_at = ${now}
      WHERE id = ${userId}`;
  }
  return userId;
}

const NONE: readonly GrantScope[] = [];

function userScope(userId: number): readonly GrantScope[] {
  return [{ kind: "user", id: userId }];
}

export function createPortalStore(db: PgContext): PortalStore {
  return {
    ...createMailOutboxMethods(db),
    ...createPortalSessionMethods(db),
    async findPortalAccount(userId) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM portal_accounts WHERE user_id = ${userId}`
      );
      return row && toPortalAccount(row);
    },
    async listPortalUsers(state) {
      // By the accounts' index on (state, created_at).
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT u.*, a.user_id AS a_user_id, a.state AS a_state,
            a.created_at AS a_created_at, a.user_held AS a_user_held
          FROM portal_accounts a JOIN users u ON u.id = a.user_id
          WHERE a.state = ${state} ORDER BY a.created_at, a.user_id`
      );
      return rows.map((row) => ({ user: toUser(row), account: toPortalAccount(row, "a_") }));
    },
    insertPortalUser(user, { now, audit, state, code, mail }) {
      return db.write(async (tx) => {
        const added = await insertUserAndAccount(tx, user, { now, state });
        if (code !== undefined) await insertCode(tx, added.id, code, now);
        await queue(tx, mail, now);
        return added;
      }, { audit, ends: () => NONE });
    },
    async insertPortalAccount(userId, { now, audit }) {
      await db.write(async (tx) => {
        await lockUser(tx, userId);
        const added = await tx`INSERT INTO portal_accounts (user_id, state, created_at,
            updated_at, user_held)
          VALUES (${userId}, 'active', ${now}, ${now}, 0) ON CONFLICT (user_id) DO NOTHING
          RETURNING user_id`;
        if (added.length === 0) throw new StoreConflict("The user has a portal account already");
      }, { audit, ends: () => NONE });
    },
    ...createCodeIssueMethods(db),
    ...createCodeUseMethods(db),
    async updatePortalState(userId, { now, audit, state, mail, from }) {
      await db.write(async (tx) => {
        // The user, then the account: the order a deletion locks them in (user_deletion.ts).
        await lockUser(tx, userId);
        if (from !== undefined) {
          const [account] = await tx<Row[]>`SELECT state FROM portal_accounts
            WHERE user_id = ${userId} FOR UPDATE`;
          if (account?.state !== from) {
            throw new StoreConflict(`The portal account is not ${from}`);
          }
        }
        await setState(tx, userId, state, now);
        if (mail !== undefined) await queue(tx, mail, now);
      }, { audit, ends: () => state === "active" ? userScope(userId) : NONE });
    },
    updatePortalPassword(userId, { now, audit, passwordHash, mail, keepSession }) {
      return db.write(async (tx) => {
        await lockUser(tx, userId);
        await tx`UPDATE users SET password_hash = ${passwordHash}, updated_at = ${now}
          WHERE id = ${userId}`;
        // The cutoff ends every token and every portal session but the one it was made in.
        const ended = await raiseCutoff(tx, userId, now, undefined, keepSession);
        await queue(tx, mail, now);
        return ended;
      }, { audit, ends: () => userScope(userId) });
    },
    async updateApiKeyLabel(keyId, { audit, label }) {
      await db.write(async (tx) => {
        const set = await tx`UPDATE api_keys SET label = ${label} WHERE id = ${keyId} RETURNING 1`;
        if (set.length === 0) throw new StoreConflict(`API key ${keyId} was deleted meanwhile`);
      }, { audit, ends: () => NONE });
    },
    deleteUnverifiedPortalUsers(before, { audit, limit, anonymize }) {
      const deleted: DeletedPortalUser[] = [];
      return db.write(async (tx) => {
        deleted.length = 0;
        // Read, not locked: deleteUserRows locks each user's keys and user row, then its account
        // (lockUser's order, that of a verification), and checks the account still waits there.
        const found = await tx<Row[]>`SELECT user_id FROM portal_accounts
          WHERE state = 'pending_verification' AND created_at < ${before}
          ORDER BY created_at LIMIT ${limit}`;
        for (const row of found) {
          const userId = Number(row.user_id);
          const anonymizing = anonymize(userId);
          let rows: DeletedUser | undefined;
          try {
            rows = await deleteUserRows(tx, userId, anonymizing, {
              onlyPortalState: "pending_verification",
            });
          } catch (error) {
            // Verified (or deleted) since the read: it stays, the next one is reached.
            if (error instanceof StoreConflict) continue;
            throw error;
          }
          if (rows !== undefined) {
            deleted.push({ userId, anonymousRef: anonymizing.anonymousRef, ...rows });
          } else {
            // No user row (the portal's rows hold no foreign key: a restored older dump): its
            // portal rows go, or every sweep would select them first again.
            await tx`DELETE FROM portal_accounts WHERE user_id = ${userId}`;
            await tx`DELETE FROM portal_codes WHERE user_id = ${userId}`;
            await tx`DELETE FROM portal_sessions WHERE user_id = ${userId}`;
          }
        }
        return [...deleted];
      }, { audit, ends: () => deleted.map(({ userId }): GrantScope => userScope(userId)[0]) });
    },
  };
}

/** Issuing one-time codes: a new one in place of the others, or beside the newest few. */
function createCodeIssueMethods(
  db: PgContext,
): Pick<PortalStore, "replacePortalCode" | "addPortalCode"> {
  return {
    async replacePortalCode(userId, { now, audit, code, mail, passwordHash }) {
      // A disabled user (an unverified sign-up) has no grant: no bump, as a first sign-up.
      let grantChanged = false;
      await db.write(async (tx) => {
        await lockUser(tx, userId);
        await tx`UPDATE portal_codes SET used_at = ${now}
          WHERE user_id = ${userId} AND purpose = ${code.purpose} AND used_at IS NULL`;
        await insertCode(tx, userId, code, now);
        if (passwordHash !== undefined) {
          const set = await tx<Row[]>`UPDATE users
            SET password_hash = ${passwordHash}, updated_at = ${now}
            WHERE id = ${userId} RETURNING disabled`;
          grantChanged = set.length === 1 && Number(set[0].disabled) !== 1;
        }
        await queue(tx, mail, now);
      }, { audit, ends: () => grantChanged ? userScope(userId) : NONE });
    },
    async addPortalCode(userId, { now, audit, code, mail, keep, keepPerNetwork }) {
      await db.write(async (tx) => {
        await lockUser(tx, userId);
        if (code.network !== undefined && keepPerNetwork !== undefined) {
          await tx`UPDATE portal_codes SET used_at = ${now}
            WHERE user_id = ${userId} AND purpose = ${code.purpose} AND used_at IS NULL
              AND network = ${code.network}
              AND id NOT IN (SELECT id FROM portal_codes WHERE user_id = ${userId}
                AND purpose = ${code.purpose} AND used_at IS NULL AND expires_at > ${now}
                AND network = ${code.network} ORDER BY id DESC LIMIT ${keepPerNetwork - 1})`;
        }
        await tx`UPDATE portal_codes SET used_at = ${now}
          WHERE user_id = ${userId} AND purpose = ${code.purpose} AND used_at IS NULL
            AND id NOT IN (SELECT id FROM portal_codes WHERE user_id = ${userId}
              AND purpose = ${code.purpose} AND used_at IS NULL AND expires_at > ${now}
              ORDER BY id DESC LIMIT ${keep - 1})`;
        await insertCode(tx, userId, code, now);
        await queue(tx, mail, now);
      }, { audit, ends: () => NONE });
    },
  };
}

/** Reading, counting and spending one-time codes. */
function createCodeUseMethods(
  db: PgContext,
): Pick<
  PortalStore,
  "findPortalCodes" | "findPortalCode" | "recordPortalCodeAttempt" | "usePortalCode"
> {
  return {
    async findPortalCodes(userId, purpose, now) {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM portal_codes WHERE user_id = ${userId} AND purpose = ${purpose}
          AND used_at IS NULL AND expires_at > ${now} ORDER BY id DESC`
      );
      return rows.map(toPortalCode);
    },
    async findPortalCode(userId, purpose, now) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM portal_codes WHERE user_id = ${userId} AND purpose = ${purpose}
          AND used_at IS NULL AND expires_at > ${now} ORDER BY id DESC LIMIT 1`
      );
      return row && toPortalCode(row);
    },
    recordPortalCodeAttempt(codeId, { audit, ofUser }) {
      const ids = typeof codeId === "number" ? [codeId] : [...codeId];
      return db.write(async (tx) => {
        // The user before its codes, the order of every portal write (user_lock.ts).
        await holdUser(tx, ofUser);
        const rows = await tx<Row[]>`UPDATE portal_codes SET attempts = attempts + 1
          WHERE id IN ${tx(ids)} RETURNING id, attempts`;
        const first = rows.find((row) => Number(row.id) === ids[0]);
        return first === undefined ? 0 : Number(first.attempts);
      }, { audit, ends: () => NONE });
    },
    usePortalCode(codeId, { now, audit, state, passwordHash, mail, changeEmail }) {
      let userId = 0;
      return db.write(async (tx) => {
        userId = await spendCode(tx, codeId, { now, changeEmail });
        if (state !== undefined) await setState(tx, userId, state, now);
        let ended = 0;
        if (passwordHash !== undefined) {
          await tx`UPDATE users SET password_hash = ${passwordHash}, updated_at = ${now}
            WHERE id = ${userId}`;
          // The cutoff ends the user's portal sessions too.
          ended = await raiseCutoff(tx, userId, now);
        }
        if (mail !== undefined) await queue(tx, mail, now);
        return ended;
      }, {
        audit,
        ends: () =>
          state !== undefined || passwordHash !== undefined || changeEmail
            ? userScope(userId)
            : NONE,
      });
    },
  };
}
