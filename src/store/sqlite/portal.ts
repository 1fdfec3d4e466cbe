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
  DeletedPortalUser,
  NewPortalCode,
  PortalAccountState,
  PortalCode,
  PortalCodePurpose,
  PortalStore,
} from "../store.ts";
import { toPortalAccount, toUser } from "../rows.ts";
import type { Connection, Row } from "./connection.ts";
import { createMailOutbox } from "./mail_outbox.ts";
import { createPortalSessionMethods } from "./portal_sessions.ts";
import { createUserCutoff, type UserCutoff } from "./user_cutoff.ts";
import { createUserDeletion } from "./user_deletion.ts";
import { type AccountStatements, prepareAccountStatements } from "./portal_statements.ts";

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
 * the user's portal sessions end (but `keepSession`). Returns how many live tokens ended.
 */
function replacePassword(
  st: AccountStatements,
  cutoff: UserCutoff,
  userId: number,
  change: { passwordHash: string; now: number; keepSession?: Uint8Array },
): number {
  const { passwordHash, now, keepSession } = change;
  st.userSetPassword.run({ id: userId, password_hash: passwordHash, now });
  const before = cutoff.nextCutoff(userId, now);
  return cutoff.revokeTokensBefore(userId, before, now, keepSession ?? null);
}

export function createPortalStore(conn: Connection): PortalStore {
  const st = prepareAccountStatements(conn);
  const cutoff = createUserCutoff(conn);
  const outbox = createMailOutbox(conn);
  const { queue } = outbox;
  return {
    ...outbox.methods,
    ...createPortalSessionMethods(conn),
    listPortalUsers(state) {
      return conn.read(() =>
        (st.usersInState.all({ state }) as Row[]).map((row) => ({
          user: toUser(row),
          account: toPortalAccount(row, "a_"),
        }))
      );
    },
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
        if (code !== undefined) insertCode(st, added.id, code, now);
        queue(mail, now);
        return added;
      }, audit);
    },
    async insertPortalAccount(userId, { now, audit }) {
      await conn.write(() => {
        st.requireUser(userId);
        if (Number(st.accountEnrol.run({ user_id: userId, now }).changes) === 0) {
          throw new StoreConflict("The user has a portal account already");
        }
      }, audit);
    },
    ...createCodeIssueMethods(conn, { st, queue }),
    ...createCodeUseMethods(conn, { st, cutoff, queue }),
    async updatePortalState(userId, { now, audit, state, mail, from }) {
      await conn.write(() => {
        st.requireUser(userId);
        if (from !== undefined) {
          const account = st.accountFind.get({ user_id: userId }) as Row | undefined;
          if (account?.state !== from) throw new StoreConflict(`The portal account is not ${from}`);
        }
        setState(st, userId, state, now);
        if (mail !== undefined) queue(mail, now);
      }, audit);
    },
    updatePortalPassword(userId, { now, audit, passwordHash, mail, keepSession }) {
      return conn.write(() => {
        st.requireUser(userId);
        const ended = replacePassword(st, cutoff, userId, { passwordHash, now, keepSession });
        queue(mail, now);
        return ended;
      }, audit);
    },
    ...createCleanUpMethods(conn, st),
  };
}

/** Stores one code row (its digest, expiry and what it carries). */
function insertCode(st: AccountStatements, userId: number, code: NewPortalCode, now: number): void {
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
}

/** Issuing one-time codes: a new one in place of the others, or beside the newest few. */
function createCodeIssueMethods(
  conn: Connection,
  { st, queue }: {
    st: AccountStatements;
    queue: ReturnType<typeof createMailOutbox>["queue"];
  },
): Pick<PortalStore, "replacePortalCode" | "addPortalCode"> {
  return {
    async replacePortalCode(userId, { now, audit, code, mail, passwordHash }) {
      await conn.write(() => {
        st.requireUser(userId);
        st.codesEnd.run({ user_id: userId, purpose: code.purpose, now });
        insertCode(st, userId, code, now);
        if (passwordHash !== undefined) {
          const set = { id: userId, password_hash: passwordHash, now };
          if (Number(st.userSetHeldPassword.run(set).changes) === 0) st.userSetPassword.run(set);
        }
        queue(mail, now);
      }, audit);
    },
    async addPortalCode(userId, { now, audit, code, mail, keep, keepPerNetwork }) {
      await conn.write(() => {
        st.requireUser(userId);
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
        insertCode(st, userId, code, now);
        queue(mail, now);
      }, audit);
    },
  };
}

/** Reading, counting and spending one-time codes. */
function createCodeUseMethods(
  conn: Connection,
  { st, cutoff, queue }: {
    st: AccountStatements;
    cutoff: UserCutoff;
    queue: ReturnType<typeof createMailOutbox>["queue"];
  },
): Pick<
  PortalStore,
  "findPortalCodes" | "findPortalCode" | "recordPortalCodeAttempt" | "usePortalCode"
> {
  return {
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
    recordPortalCodeAttempt(codeId, { audit, ofUser }) {
      const ids = typeof codeId === "number" ? [codeId] : codeId;
      return conn.write(() => {
        st.requireUser(ofUser);
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
          : replacePassword(st, cutoff, userId, { passwordHash, now });
        if (mail !== undefined) queue(mail, now);
        return ended;
      }, audit);
    },
  };
}

/** Key labels, and the janitor's deletion of unverified sign-ups. */
function createCleanUpMethods(
  conn: Connection,
  st: AccountStatements,
): Pick<PortalStore, "updateApiKeyLabel" | "deleteUnverifiedPortalUsers"> {
  const deleteUserRows = createUserDeletion(conn);
  return {
    async updateApiKeyLabel(keyId, { label, audit }) {
      await conn.write(() => {
        if (Number(st.keySetLabel.run({ id: keyId, label }).changes) === 0) {
          throw new StoreConflict(`API key ${keyId} was deleted meanwhile`);
        }
      }, audit);
    },
    deleteUnverifiedPortalUsers(before, { limit, audit, anonymize }) {
      return conn.write(() => {
        const deleted: DeletedPortalUser[] = [];
        for (const row of st.unverifiedFind.all({ before, limit }) as Row[]) {
          const userId = row.id as number;
          const anonymizing = anonymize(userId);
          const rows = deleteUserRows(userId, anonymizing);
          if (rows !== undefined) {
            deleted.push({ userId, anonymousRef: anonymizing.anonymousRef, ...rows });
          }
        }
        return deleted;
      }, audit);
    },
  };
}
