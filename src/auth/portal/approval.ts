/**
 * An operator's side of `approval` mode (docs/portal.md): the accounts that wait, and refusing
 * one. Approving is `approveAccount` (accounts.ts), which the CLI and the admin API both call.
 *
 * @module
 */
import { StoreConflict } from "../../store/errors.ts";
import type { DeletedUser, Store, User } from "../../store/store.ts";
import type { ChangeDeps } from "../changes.ts";
import { AuthError } from "../errors.ts";
import { entry, toPortalActor } from "./account_deps.ts";
import { generateDeletedRef } from "../user_anonymity.ts";

/** A portal account that waits for an operator. */
export interface PendingAccount {
  user: User;
  /** When the account signed up. */
  signedUpAt: number;
}

/**
 * The accounts in state `pending_approval` whose user is disabled (until approved; an
 * operator's enable takes it off the list), oldest sign-up first: one indexed read.
 */
export async function listPendingAccounts(store: Store): Promise<PendingAccount[]> {
  return (await store.listPortalUsers("pending_approval"))
    .filter(({ user }) => user.disabled)
    .map(({ user, account }) => ({ user, signedUpAt: account.createdAt }));
}

/**
 * Checks that `user`'s portal account waits for an operator, before `verb` (approve, refuse).
 * @throws {AuthError} `not_found` without such an account, `conflict` unless it waits.
 */
export async function requireWaitingAccount(
  deps: Pick<ChangeDeps, "store">,
  user: User,
  verb: string,
): Promise<void> {
  const account = await deps.store.findPortalAccount(user.id);
  if (account === undefined) {
    throw new AuthError("not_found", `No portal account for "${user.email}"`);
  }
  if (account.state !== "pending_approval") {
    throw new AuthError(
      "conflict",
      `Cannot ${verb} ${user.email}: the account is ${account.state.replace("_", " ")}`,
    );
  }
}

/**
 * An operator refuses an account waiting in `approval` mode: the user and its portal rows are
 * deleted in one transaction (it never held keys or tokens), and the address may sign up
 * again. No mail is sent. The audit entry names the account by an opaque id and its numeric
 * user id, never the e-mail, and the account's earlier entries take that id too, as a deleted
 * account's do (`deleteOwnAccount`).
 * @throws {AuthError} `not_found` without such an account, `conflict` unless it waits.
 */
export async function refuseAccount(deps: ChangeDeps, user: User): Promise<DeletedUser> {
  await requireWaitingAccount(deps, user, "refuse");
  const ref = generateDeletedRef();
  try {
    // The state is checked again in the delete's transaction: an approval between the check
    // above and the delete (another operator, another instance) must win, not be undone.
    return await deps.store.deleteUser(user.id, {
      now: deps.clock.now(),
      anonymousRef: ref,
      anonymousActor: toPortalActor(user),
      onlyPortalState: "pending_approval",
      audit: () => entry(deps, deps.actor, "portal.refused", ref, { user_id: user.id }),
    });
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    // Says what it became meanwhile (or that it is gone): the same answers as the first check.
    await requireWaitingAccount(deps, user, "refuse");
    throw new AuthError("conflict", `Cannot refuse ${user.email}: the account changed meanwhile`);
  }
}
