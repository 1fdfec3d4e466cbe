/**
 * Users on PostgreSQL: {@link UserStore}, from a login's first read to renaming and deleting
 * (the per-user cutoff moves in user_cutoff.ts).
 *
 * @module
 */
import type { AuditedChange, NewUser, User, UserStore } from "../store.ts";
import type { PgContext } from "./db.ts";
import { type Row, toApiKey, toLoginFailures, toUser } from "../rows.ts";
import { raiseCutoff } from "./user_cutoff.ts";
import { deleteUserRows } from "./user_deletion.ts";

/** The columns of `row` whose names start with `prefix`, without it. */
function unprefixed(row: Row, prefix: string): Row {
  const result: Row = {};
  for (const [name, value] of Object.entries(row)) {
    if (name.startsWith(prefix)) result[name.slice(prefix.length)] = value;
  }
  return result;
}

/**
 * A login's first read, in one round trip: the user by e-mail, the API key by hash and, when
 * `read` asks, the login failure counters (see {@link UserStore.findUserAndKey}).
 */
async function findUserAndKey(
  db: PgContext,
  ...[email, keyHash, read]: Parameters<UserStore["findUserAndKey"]>
): ReturnType<UserStore["findUserAndKey"]> {
  const subjects = read?.subjects ?? [];
  if (subjects.length > 2) throw new RangeError("At most two subjects at once");
  // Both rows in one round trip: each column of the two tables once, the key's prefixed,
  // and the counters asked for as one JSON array.
  const [row] = await db.read((sql) =>
    sql<Row[]>`SELECT ${
      read === undefined ? sql`'[]'::jsonb` : sql`(
          SELECT coalesce(jsonb_agg(to_jsonb(f) ORDER BY f.subject COLLATE "C"), '[]'::jsonb)
          FROM login_failures f
          WHERE (${
        subjects.length === 0 ? sql`FALSE` : sql`f.subject IN ${sql(subjects as string[])}`
      } OR f.subject = ${read.keySubjectPrefix} || k.id::text)
            AND f.forget_at > ${read.now})`
    } AS failures, u.*, k.id AS k_id, k.user_id AS k_user_id, k.prefix AS k_prefix,
          k.label AS k_label, k.created_at AS k_created_at, k.revoked_at AS k_revoked_at,
          k.expires_at AS k_expires_at, k.disabled_at AS k_disabled_at,
          k.replaced_by AS k_replaced_by, k.last_used_at AS k_last_used_at,
          k.last_used_from AS k_last_used_from, k.use_count AS k_use_count,
          k.introspect AS k_introspect
        FROM (VALUES (1)) AS one (x)
        -- PostgreSQL's text cannot hold a NUL, so no user has one; asking would be an error.
        LEFT JOIN users u ON u.email = ${email.includes("\0") ? null : email}
        LEFT JOIN api_keys k ON k.key_hash = ${keyHash}`
  );
  return {
    user: row.id === null ? undefined : toUser(row),
    key: row.k_id === null ? undefined : toApiKey(unprefixed(row, "k_")),
    failures: (row.failures as Row[]).map(toLoginFailures),
  };
}

export function createUserStore(db: PgContext): UserStore {
  return {
    async findUserByEmail(email) {
      // PostgreSQL's text cannot hold a NUL, so no user has one; asking would be an error.
      if (email.includes("\0")) return undefined;
      const [row] = await db.read((sql) => sql<Row[]>`SELECT * FROM users WHERE email = ${email}`);
      return row && toUser(row);
    },

    findUserAndKey: (email, keyHash, read) => findUserAndKey(db, email, keyHash, read),

    async findUserById(id) {
      const [row] = await db.read((sql) => sql<Row[]>`SELECT * FROM users WHERE id = ${id}`);
      return row && toUser(row);
    },

    async listUsers() {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM users ORDER BY email COLLATE "C"`
      );
      return rows.map(toUser);
    },

    insertUser(user: NewUser, change: AuditedChange<User>) {
      return db.write(async (tx) => {
        const [row] = await tx<Row[]>`
          INSERT INTO users (email, password_hash, token_timeout_seconds, created_at, updated_at)
          VALUES (${user.email}, ${user.passwordHash}, ${user.tokenTimeoutSeconds},
            ${change.now}, ${change.now})
          RETURNING *`;
        return toUser(row);
      }, { audit: change.audit, ends: () => [] });
    },

    async updateUserTimeout(userId, change) {
      await db.write(async (tx) => {
        await tx`UPDATE users SET token_timeout_seconds = ${change.tokenTimeoutSeconds},
          updated_at = ${change.now} WHERE id = ${userId}`;
        // Counted as a grant change, as on SQLite (the contract pins it): it changes the user row.
      }, { audit: change.audit, ends: () => [{ kind: "user", id: userId }] });
    },

    updateUserPassword(userId, change) {
      return db.write(async (tx) => {
        await tx`UPDATE users SET password_hash = ${change.passwordHash}, updated_at = ${change.now}
          WHERE id = ${userId}`;
        return await raiseCutoff(tx, userId, change.now, undefined, change.keepPortalSession);
      }, { audit: change.audit, ends: () => [{ kind: "user", id: userId }] });
    },

    updateUserDisabled(userId, change) {
      return db.write(async (tx) => {
        await tx`UPDATE users SET disabled = ${change.disabled ? 1 : 0}, updated_at = ${change.now}
          WHERE id = ${userId}`;
        // The operator decides now: a portal activation no longer enables the user.
        await tx`UPDATE portal_accounts SET user_held = 0 WHERE user_id = ${userId} AND user_held = 1`;
        return change.disabled ? await raiseCutoff(tx, userId, change.now) : 0;
        // Enabling ends nothing, but is recorded as on SQLite (its trigger sees the column).
      }, { audit: change.audit, ends: () => [{ kind: "user", id: userId }] });
    },

    async updateUserEmail(userId, change) {
      await db.write(async (tx) => {
        await tx`UPDATE users SET email = ${change.email}, updated_at = ${change.now}
          WHERE id = ${userId}`;
      }, {
        audit: change.audit,
        // Cached grants carry the e-mail (X-Keygate-Email): drop them, so every instance shows
        // the new one on its next request.
        ends: () => [{ kind: "user", id: userId }],
      });
    },

    deleteUser(userId, change) {
      const { anonymousRef, anonymousActor, forgetCounters, onlyPortalState } = change;
      return db.write(
        async (tx) =>
          await deleteUserRows(tx, userId, { anonymousRef, anonymousActor, forgetCounters }, {
            onlyPortalState,
          }) ?? { apiKeys: 0, tokens: 0, auditRows: 0 },
        { audit: change.audit, ends: () => [{ kind: "user", id: userId }] },
      );
    },
  };
}
