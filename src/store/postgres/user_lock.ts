/**
 * Locking a user's row before a write keyed by the user, a helper of portal.ts,
 * portal_sessions.ts, api_keys.ts, audit.ts and mail_outbox.ts.
 *
 * @module
 */
import type postgres from "postgres";
import { StoreConflict } from "../errors.ts";
import type { Row } from "../rows.ts";

/**
 * Locks user `userId`'s row, first of every row of the user a write touches: the order every
 * write that locks a user and its portal rows (accounts, codes, sessions) takes, so no two of
 * them deadlock. A deletion (user_deletion.ts) takes the user's keys before it, as a login does.
 * The portal's tables hold no foreign key to users here, so this is what keeps a write that
 * waited on a deletion (or came after it) from leaving a code, a session, an audit row naming
 * the address or a queued mail to it.
 * @throws {StoreConflict} when the user is gone (deleted meanwhile); nothing is written.
 */
export async function lockUser(tx: postgres.TransactionSql, userId: number): Promise<void> {
  const [row] = await tx<Row[]>`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`;
  if (row === undefined) throw new StoreConflict(`User ${userId} was deleted meanwhile`);
}

/**
 * Holds user `userId`'s row against its deletion (`FOR KEY SHARE`: writes that only name the
 * user, such as an audit row or a mail to its address, or add a row of it that nothing counts,
 * such as a session or an uncapped key, do not wait for each other) until the transaction
 * ends; a deletion that comes later waits for it, and its anonymisation (a later statement, so a
 * later snapshot) then sees what this one wrote. With `undefined` (a write that names no user)
 * it does nothing.
 * @throws {StoreConflict} when the user is gone (deleted meanwhile); nothing is written.
 */
export async function holdUser(
  tx: postgres.TransactionSql,
  userId: number | undefined,
): Promise<void> {
  if (userId === undefined) return;
  const [row] = await tx<Row[]>`SELECT id FROM users WHERE id = ${userId} FOR KEY SHARE`;
  if (row === undefined) throw new StoreConflict(`User ${userId} was deleted meanwhile`);
}
