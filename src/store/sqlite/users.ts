/**
 * The users table: {@link UserStore} on SQLite (the cutoff it holds for each user's tokens
 * moves in user_cutoff.ts).
 *
 * @module
 */
import type { ApiKeyStore, LoginFailures, LoginFailureStore, User, UserStore } from "../store.ts";
import type { Connection, Row } from "./connection.ts";
import { StoreConflict } from "../errors.ts";
import { toUser } from "../rows.ts";
import { createUserCutoff } from "./user_cutoff.ts";
import { createUserDeletion } from "./user_deletion.ts";

/** The other groups a login's first read ({@link UserStore.findUserAndKey}) combines. */
export interface UserStoreDeps {
  keys: Pick<ApiKeyStore, "findApiKeyByHash">;
  loginFailures: Pick<LoginFailureStore, "findLoginFailures">;
}

/** The users table's statements, prepared once (deleting a user is user_deletion.ts). */
function prepareUserStatements({ sql }: Connection) {
  const userByEmail = sql("SELECT * FROM users WHERE email = :email");
  const usersAll = sql("SELECT * FROM users ORDER BY email");
  const userById = sql("SELECT * FROM users WHERE id = :id");
  // Keeps grants: a new user has no tokens yet.
  const userInsert = sql(
    `INSERT INTO users (email, password_hash, token_timeout_seconds, created_at, updated_at)
     VALUES (:email, :password_hash, :timeout, :now, :now) RETURNING *`,
    "keeps-grants",
  );
  const userSetTimeout = sql(
    "UPDATE users SET token_timeout_seconds = :timeout, updated_at = :now WHERE id = :id",
  );
  const userSetPassword = sql(
    "UPDATE users SET password_hash = :password_hash, updated_at = :now WHERE id = :id",
  );
  const userSetDisabled = sql(
    "UPDATE users SET disabled = :disabled, updated_at = :now WHERE id = :id",
  );
  const portalStateOf = sql("SELECT state FROM portal_accounts WHERE user_id = :user_id");
  const portalHoldEnd = sql(
    "UPDATE portal_accounts SET user_held = 0 WHERE user_id = :user_id AND user_held = 1",
    "keeps-grants",
  );
  // Alters grants: a cached grant carries the e-mail (token_info, X-Keygate-Email).
  const userSetEmail = sql("UPDATE users SET email = :email, updated_at = :now WHERE id = :id");
  return {
    userByEmail,
    usersAll,
    userById,
    userInsert,
    userSetTimeout,
    userSetPassword,
    userSetDisabled,
    portalHoldEnd,
    portalStateOf,
    userSetEmail,
  };
}

/** The users table: {@link UserStore} on SQLite. */
export function createUserStore(conn: Connection, deps: UserStoreDeps): UserStore {
  const { nextCutoff, revokeTokensBefore } = createUserCutoff(conn);
  const statements = prepareUserStatements(conn);
  const deleteUserRows = createUserDeletion(conn);
  function findUserByEmail(email: string): Promise<User | undefined> {
    return conn.read(() => {
      const row = statements.userByEmail.get({ email }) as Row | undefined;
      return row && toUser(row);
    });
  }

  return {
    findUserByEmail,

    async findUserAndKey(email, keyHash, read) {
      const user = await findUserByEmail(email);
      const key = await deps.keys.findApiKeyByHash(keyHash);
      if (read === undefined) return { user, key, failures: [] };
      const { findLoginFailures } = deps.loginFailures;
      const failures: LoginFailures[] = [
        ...await findLoginFailures(read.subjects, read.now),
        ...key === undefined
          ? []
          : await findLoginFailures([`${read.keySubjectPrefix}${key.id}`], read.now),
      ];
      failures.sort((a, b) => a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0);
      return { user, key, failures };
    },

    findUserById(id) {
      return conn.read(() => {
        const row = statements.userById.get({ id }) as Row | undefined;
        return row && toUser(row);
      });
    },

    listUsers() {
      return conn.read(() => (statements.usersAll.all() as Row[]).map(toUser));
    },

    insertUser(user, { now, audit }) {
      return conn.write(() =>
        toUser(statements.userInsert.get({
          email: user.email,
          password_hash: user.passwordHash,
          timeout: user.tokenTimeoutSeconds,
          now,
        }) as Row), audit);
    },

    updateUserTimeout(userId, { tokenTimeoutSeconds, now, audit }) {
      return conn.write(() => {
        statements.userSetTimeout.run({ id: userId, timeout: tokenTimeoutSeconds, now });
      }, audit);
    },

    updateUserPassword(userId, { passwordHash, now, audit, keepPortalSession }) {
      return conn.write(() => {
        statements.userSetPassword.run({ id: userId, password_hash: passwordHash, now });
        return revokeTokensBefore(userId, nextCutoff(userId, now), now, keepPortalSession ?? null);
      }, audit);
    },

    updateUserDisabled(userId, { disabled, now, audit }) {
      return conn.write(() => {
        statements.userSetDisabled.run({ id: userId, disabled: disabled ? 1 : 0, now });
        // The operator decides now: a portal activation no longer enables the user.
        statements.portalHoldEnd.run({ user_id: userId });
        return disabled ? revokeTokensBefore(userId, nextCutoff(userId, now), now) : 0;
      }, audit);
    },

    updateUserEmail(userId, { email, now, audit }) {
      return conn.write(() => {
        statements.userSetEmail.run({ id: userId, email, now });
      }, audit);
    },

    deleteUser(userId, { audit, anonymousRef, anonymousActor, forgetCounters, onlyPortalState }) {
      return conn.write(() => {
        if (onlyPortalState !== undefined) {
          const account = statements.portalStateOf.get({ user_id: userId }) as Row | undefined;
          if (account?.state !== onlyPortalState) {
            throw new StoreConflict(`The portal account is not ${onlyPortalState}`);
          }
        }
        return deleteUserRows(userId, { anonymousRef, anonymousActor, forgetCounters }) ??
          { apiKeys: 0, tokens: 0, auditRows: 0 };
      }, audit);
    },
  };
}
