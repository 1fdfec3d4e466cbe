/**
 * Enrolling a user an operator added in the portal (docs/portal.md): with
 * `--portal-existing-users off` (the default) such a user may not sign in to the portal nor
 * reset its password there until an operator enrols it, so that turning the portal on hands
 * no account to whoever reads an address an operator typed. The CLI (`admin portal enrol`)
 * calls this.
 *
 * @module
 */
import { StoreConflict } from "../../store/errors.ts";
import type { User } from "../../store/store.ts";
import { toUserRef } from "../audit.ts";
import type { ChangeDeps } from "../changes.ts";
import { AuthError } from "../errors.ts";
import { entry } from "./account_deps.ts";

/**
 * Gives `user` an active portal account: it may then sign in to the portal (once it has a
 * password it knows, through "Forgot your password?").
 * @throws {AuthError} `conflict` when the user has a portal account already, `not_found` when
 * the user was deleted meanwhile.
 */
export async function enrolUser(deps: ChangeDeps, user: User): Promise<void> {
  try {
    await deps.store.insertPortalAccount(user.id, {
      now: deps.clock.now(),
      audit: entry(deps, deps.actor, "portal.enrolled", toUserRef(user.email)),
    });
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    const account = await deps.store.findPortalAccount(user.id);
    if (account === undefined) {
      // No account, so the user itself is gone (deleted meanwhile).
      throw new AuthError("not_found", `No user "${user.email}"`);
    }
    throw new AuthError(
      "conflict",
      `Cannot enrol ${user.email}: it has a portal account already` +
        ` (${account.state.replace("_", " ")})`,
    );
  }
}
