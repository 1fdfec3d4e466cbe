/**
 * Portal sessions on PostgreSQL, a helper of portal.ts (which returns `PortalStore`): stored by
 * their id's SHA-256, expired ones pruned as new ones are made. A password change's ending of
 * sessions is in portal.ts, in the change's own transaction.
 *
 * @module
 */
import type { GrantScope, PortalStore } from "../store.ts";
import { type Row, toPortalSessionUser } from "../rows.ts";
import type { PgContext } from "./db.ts";
import { holdUser } from "./user_lock.ts";

/** The session methods of the portal's group. */
export type PortalSessionMethods = Pick<
  PortalStore,
  "insertPortalSession" | "findPortalSessionUser" | "deletePortalSession"
>;

const NONE: readonly GrantScope[] = [];

/** The session methods on `db`; sessions hold no grant, so no write ends one. */
export function createPortalSessionMethods(db: PgContext): PortalSessionMethods {
  return {
    async insertPortalSession(idHash, { now, audit, userId, expiresAt }) {
      await db.write(async (tx) => {
        // No foreign key here: a session for a user deleted meanwhile is refused. Holding the
        // user (not locking it) is enough, and a user's sessions made at once do not queue: what
        // this writes counts nothing and reads no user column, and a deletion or a cutoff raise
        // (user_cutoff.ts) locks the user `FOR UPDATE`, so each still waits for this one, then
        // deletes its session in a later statement, or comes first and ends this one.
        await holdUser(tx, userId);
        await tx`DELETE FROM portal_sessions WHERE id_hash IN (
          SELECT id_hash FROM portal_sessions WHERE expires_at <= ${now} LIMIT 100)`;
        await tx`INSERT INTO portal_sessions (id_hash, user_id, created_at, expires_at)
          VALUES (${idHash}, ${userId}, ${now}, ${expiresAt})`;
      }, { audit, ends: () => NONE });
    },
    async findPortalSessionUser(idHash, now) {
      // A signed-in request's one read: the session, its user and the user's portal account.
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT u.*, s.created_at AS s_created_at, s.expires_at AS s_expires_at,
            a.user_id AS a_user_id, a.state AS a_state, a.created_at AS a_created_at,
            a.user_held AS a_user_held
          FROM portal_sessions s JOIN users u ON u.id = s.user_id
            LEFT JOIN portal_accounts a ON a.user_id = s.user_id
          WHERE s.id_hash = ${idHash} AND s.expires_at > ${now}`
      );
      return row && toPortalSessionUser(row);
    },
    deletePortalSession(idHash, { audit }) {
      return db.write(async (tx) => {
        const rows = await tx`DELETE FROM portal_sessions WHERE id_hash = ${idHash} RETURNING 1`;
        return rows.length === 1;
      }, { audit, ends: () => NONE });
    },
  };
}
