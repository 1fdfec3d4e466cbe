/**
 * Renaming and deleting users, and listing a user's token rows, on
 * PostgreSQL (the admin CLI's `user rename`, `user delete`, `token list`).
 *
 * @module
 */
import type { TokenStore, UserStore } from "../store.ts";
import type { PgContext } from "./db.ts";
import { type Row, toTokenRow } from "../rows.ts";

export function createUserRemovalMethods(
  db: PgContext,
): Pick<UserStore, "updateUserEmail" | "deleteUser"> & Pick<TokenStore, "listTokensOfUser"> {
  return {
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
      return db.write(async (tx) => {
        // Keys before their user, as a login does (its key's row, then the user's for the token's
        // foreign key): the same order, so a login and a delete never deadlock.
        await tx`SELECT id FROM api_keys WHERE user_id = ${userId} ORDER BY id FOR UPDATE`;
        await tx`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`;
        const tokens = await tx`DELETE FROM tokens WHERE user_id = ${userId} RETURNING id`;
        await tx`DELETE FROM login_failures WHERE subject IN (
            SELECT 'key:' || id FROM api_keys WHERE user_id = ${userId})`;
        const keys = await tx`DELETE FROM api_keys WHERE user_id = ${userId} RETURNING id`;
        // The portal's rows hold no foreign key (a restored older dump must be able to drop
        // users: docs/postgres.md), so they go here.
        await tx`DELETE FROM portal_accounts WHERE user_id = ${userId}`;
        await tx`DELETE FROM portal_codes WHERE user_id = ${userId}`;
        await tx`DELETE FROM portal_sessions WHERE user_id = ${userId}`;
        await tx`DELETE FROM users WHERE id = ${userId}`;
        return { apiKeys: keys.length, tokens: tokens.length };
      }, { audit: change.audit, ends: () => [{ kind: "user", id: userId }] });
    },

    async listTokensOfUser(userId) {
      const rows = await db.read((sql) =>
        sql<Row[]>`SELECT id, api_key_id, issued_at, expires_at, revoked_at FROM tokens
          WHERE user_id = ${userId} ORDER BY issued_at DESC, id DESC`
      );
      return rows.map(toTokenRow);
    },
  };
}
