/**
 * Portal sessions on PostgreSQL, a helper of portal.ts (which returns `PortalStore`): stored by
 * their id's SHA-256, expired ones pruned as new ones are made. A password change's ending of
 * sessions is in portal.ts, in the change's own transaction.
 *
 * @module
 */
import type { GrantScope, PortalStore } from "../store.ts";
import type { Row } from "../rows.ts";
import type { PgContext } from "./db.ts";

/** The session methods of the portal's group. */
export type PortalSessionMethods = Pick<
  PortalStore,
  "insertPortalSession" | "findPortalSession" | "deletePortalSession"
>;

const NONE: readonly GrantScope[] = [];

/** The session methods on `db`; sessions hold no grant, so no write ends one. */
export function createPortalSessionMethods(db: PgContext): PortalSessionMethods {
  return {
    async insertPortalSession(idHash, { now, audit, userId, expiresAt }) {
      await db.write(async (tx) => {
        await tx`DELETE FROM portal_sessions WHERE id_hash IN (
          SELECT id_hash FROM portal_sessions WHERE expires_at <= ${now} LIMIT 100)`;
        await tx`INSERT INTO portal_sessions (id_hash, user_id, created_at, expires_at)
          VALUES (${idHash}, ${userId}, ${now}, ${expiresAt})`;
      }, { audit, ends: () => NONE });
    },
    async findPortalSession(idHash, now) {
      const [row] = await db.read((sql) =>
        sql<Row[]>`SELECT * FROM portal_sessions WHERE id_hash = ${idHash}
          AND expires_at > ${now}`
      );
      return row && {
        userId: Number(row.user_id),
        createdAt: Number(row.created_at),
        expiresAt: Number(row.expires_at),
      };
    },
    deletePortalSession(idHash, { audit }) {
      return db.write(async (tx) => {
        const rows = await tx`DELETE FROM portal_sessions WHERE id_hash = ${idHash} RETURNING 1`;
        return rows.length === 1;
      }, { audit, ends: () => NONE });
    },
  };
}
