/**
 * Portal sessions on SQLite, a helper of portal.ts (which returns `PortalStore`): stored by
 * their id's SHA-256, expired ones pruned as new ones are made. A password change's ending of
 * sessions is in portal.ts, in the change's own transaction.
 *
 * @module
 */
import type { PortalStore } from "../store.ts";
import type { Connection, Row } from "./connection.ts";
import { toPortalSessionUser } from "../rows.ts";

/** The session methods of the portal's group. */
export type PortalSessionMethods = Pick<
  PortalStore,
  "insertPortalSession" | "findPortalSessionUser" | "deletePortalSession"
>;

/** Prepares the session statements on `conn`. */
export function createPortalSessionMethods(conn: Connection): PortalSessionMethods {
  const { sql } = conn;
  // Sessions hold no grant: every statement keeps grants.
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
  // A signed-in request's one read: the session, its user and the user's portal account.
  const sessionUserFind = sql(
    `SELECT u.*, s.created_at AS s_created_at, s.expires_at AS s_expires_at,
       a.user_id AS a_user_id, a.state AS a_state, a.created_at AS a_created_at,
       a.user_held AS a_user_held
     FROM portal_sessions s JOIN users u ON u.id = s.user_id
       LEFT JOIN portal_accounts a ON a.user_id = s.user_id
     WHERE s.id_hash = :id_hash AND s.expires_at > :now`,
  );
  const sessionDelete = sql("DELETE FROM portal_sessions WHERE id_hash = :id_hash", "keeps-grants");
  return {
    async insertPortalSession(idHash, { now, audit, userId, expiresAt }) {
      await conn.write(() => {
        sessionsPrune.run({ now });
        sessionInsert.run({ id_hash: idHash, user_id: userId, now, expires_at: expiresAt });
      }, audit);
    },
    findPortalSessionUser(idHash, now) {
      return conn.read(() => {
        const row = sessionUserFind.get({ id_hash: idHash, now }) as Row | undefined;
        return row && toPortalSessionUser(row);
      });
    },
    deletePortalSession(idHash, { audit }) {
      return conn.write(() => Number(sessionDelete.run({ id_hash: idHash }).changes) === 1, audit);
    },
  };
}
