/**
 * A portal write that names a user's address (an audit row, a notice) without changing the
 * user, made while a deletion of that user may commit: the store refuses it once the user is
 * gone (`ofUser`, checked in the write's transaction), and the request answers as it would have
 * anyway, so neither a 500 nor a different answer tells that the address was known.
 *
 * @module
 */
import { StoreConflict } from "../../store/errors.ts";

/** Awaits `write`; a refusal because its user was deleted meanwhile (nothing written) is dropped. */
export async function ignoreDeleted(write: Promise<unknown>): Promise<void> {
  try {
    await write;
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
  }
}
