/**
 * Refusing a write for a user deleted meanwhile on SQLite, a helper of api_keys.ts, audit.ts,
 * mail_outbox.ts and portal_statements.ts (for portal.ts).
 *
 * @module
 */
import { StoreConflict } from "../errors.ts";
import type { Connection } from "./connection.ts";

/**
 * A check to run first inside a write transaction (BEGIN IMMEDIATE: no deletion can commit
 * between it and the write): it throws, so the transaction rolls back, when user `userId` is
 * gone. With `undefined` (a write that names no user) it passes.
 * @throws {StoreConflict} when there is no such user.
 */
export type UserCheck = (userId: number | undefined) => void;

/** Prepares the {@link UserCheck} on `conn`. */
export function createUserCheck(conn: Connection): UserCheck {
  const userExists = conn.sql("SELECT 1 AS present FROM users WHERE id = :id");
  return (userId) => {
    if (userId === undefined) return;
    if (userExists.get({ id: userId }) === undefined) {
      throw new StoreConflict(`User ${userId} was deleted meanwhile`);
    }
  };
}
