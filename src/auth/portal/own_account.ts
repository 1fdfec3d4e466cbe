/**
 * What a signed-in portal user does with their own account: change its e-mail (re-verified
 * by a code mailed to the new address before it takes effect, then a notice to the old one),
 * change its password (a notice by mail; other sessions end) and delete it. Each change is one
 * atomic, audited store call that queues its mail in the same transaction.
 *
 * No enumeration of the new address: asking to move to an address another account has
 * answers exactly as for a free one, after the same work (the password check, one write);
 * only no code is mailed (its owner is not bothered, and the asker learns nothing). The audit
 * log says which it was, for operators.
 *
 * @module
 */
import type { PasswordHasher } from "../../passwords/passwords.ts";
import type { Clock } from "../../platform/clock.ts";
import { StoreConflict } from "../../store/errors.ts";
import type { DeletedUser, Store, User } from "../../store/store.ts";
import { toUserRef } from "../audit.ts";
import { hashSecret } from "../credentials.ts";
import { AuthError } from "../errors.ts";
import { findUserInAnyForm } from "../users.ts";
import { generateDeletedRef } from "../user_anonymity.ts";
import { isAllowedDomain, toMailboxEmail } from "./mail_address.ts";
import {
  entry,
  hashPortalPassword,
  type PortalClient,
  type SignUpMode,
  toPortalActor,
} from "./account_deps.ts";
import { VERIFY_CODE_MS } from "./accounts.ts";
import { checkEmailChangeCode } from "./code_check.ts";
import { checkSignInPassword } from "./sessions.ts";
import { toPortalPassword } from "./portal_password.ts";
import { generateCode, hashCode } from "./codes.ts";
import { toEmailChangedMail, toEmailChangeMail, toPasswordChangedMail } from "./portal_mail.ts";
import type { PortalThrottle } from "./portal_throttle.ts";

/** What the own-account use cases need. */
export interface OwnAccountDeps {
  store: Store;
  clock: Clock;
  hasher: Pick<PasswordHasher, "hash" | "verify" | "findRefusal">;
  throttle: PortalThrottle;
  /** The sign-up mode: in `domains` mode a new address must be in one of `domains` too. */
  mode?: SignUpMode;
  domains?: readonly string[];
  /** The key of the codes' digests (`--portal-secret-file`). */
  codeKey: Uint8Array;
}

/**
 * Checks the signed-in user's current password with sign-in's own password step
 * (`checkSignInPassword`: its throttle, size rule and abort signal), so a stolen session cannot
 * guess the password faster than sign-in allows.
 * @throws {AuthError} `too_many_attempts`, `service_busy`, `request_aborted`, or
 * `invalid_credentials` unless `password` is the user's.
 */
async function checkPassword(
  deps: OwnAccountDeps,
  client: PortalClient,
  user: User,
  password: unknown,
): Promise<void> {
  const attempt = { email: user.email, hash: user.passwordHash, password };
  if (!await checkSignInPassword(deps, client, attempt)) {
    throw new AuthError("invalid_credentials", "The current password is wrong");
  }
}

/**
 * Asks to move the account to `email`: a code goes to that address, unless another account
 * has it (then nothing is mailed; the answer is the same, see @module).
 * @throws {AuthError} `invalid_request` for the address, `invalid_credentials` for a wrong
 * password, `too_many_attempts`, `conflict` when the user was deleted meanwhile.
 */
export async function requestEmailChange(
  deps: OwnAccountDeps,
  client: PortalClient,
  user: User,
  input: { email: string; password: unknown },
): Promise<void> {
  // One plain mailbox, as at sign-up; and in `domains` mode, an allowed domain (else a changed
  // address would pass what sign-up refuses).
  const email = toMailboxEmail(input.email);
  if (!isAllowedDomain(email, deps)) {
    throw new AuthError(
      "forbidden",
      "The portal is open to some e-mail domains only, not this one",
    );
  }
  // The password first: a wrong one must not count against the target address's mail.
  await checkPassword(deps, client, user, input.password);
  await deps.throttle.check("mail", client.address, email);
  await deps.throttle.count("mail", client.address, email);
  if (email === user.email) {
    throw new AuthError("invalid_request", "Invalid e-mail: it is already your address");
  }
  const now = deps.clock.now();
  const actor = toPortalActor(user);
  const taken = await findUserInAnyForm(deps.store, email) !== undefined;
  if (taken) {
    // Only while the user exists, answered as the other branch answers its own deletion.
    await orDeleted(deps.store.appendAudit(
      entry(deps, actor, "portal.email_change_requested", toUserRef(user.email), {
        to: email,
        mailed: 0,
      }),
      { ofUser: user.id },
    ));
    return;
  }
  const code = generateCode();
  await orDeleted(deps.store.replacePortalCode(user.id, {
    now,
    code: {
      purpose: "email",
      codeHash: hashCode(email, code, deps.codeKey),
      expiresAt: now + VERIFY_CODE_MS,
      newEmail: email,
    },
    mail: toEmailChangeMail(client.links, email, code),
    audit: entry(deps, actor, "portal.email_change_requested", toUserRef(user.email), {
      to: email,
      mailed: 1,
    }),
  }));
}

/**
 * `write`, but a user deleted meanwhile (the signed-in user's own deletion, in another tab) is
 * `conflict`: the store wrote nothing.
 */
async function orDeleted<T>(write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    throw new AuthError("conflict", "Your account was deleted meanwhile");
  }
}

/**
 * Confirms an e-mail change with the code mailed to the new address: it becomes the
 * account's, and the old address gets a notice. Resolves to the new address.
 * @throws {AuthError} `invalid_request` for a wrong, used or expired code, `conflict` when the
 * address was taken meanwhile (by a sign-up: only the holder of the code learns it).
 */
export async function confirmEmailChange(
  deps: OwnAccountDeps,
  client: PortalClient,
  user: User,
  input: { code: unknown },
): Promise<string> {
  const stored = await checkEmailChangeCode(deps, client, user, input);
  const actor = toPortalActor(user);
  const email = stored.newEmail;
  try {
    await deps.store.usePortalCode(stored.id, {
      now: deps.clock.now(),
      changeEmail: true,
      mail: toEmailChangedMail(client.links, user.email, email),
      audit: entry(deps, actor, "portal.email_changed", toUserRef(email), {
        from: user.email,
        user_id: user.id,
      }),
    });
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    throw new AuthError(
      "conflict",
      "Cannot change the e-mail: the code was used meanwhile, or the address is taken now",
    );
  }
  return email;
}

/**
 * Changes the user's password after checking the current one: every token ends, every other
 * portal session too, and a notice is mailed. Resolves to how many live tokens ended.
 * @throws {AuthError} `invalid_credentials` for a wrong current password, `invalid_request`
 * for the new one, `too_many_attempts` (the sign-in throttle's, see `checkPassword`),
 * `service_busy` while the password pool is busy, `conflict` when the user was deleted
 * meanwhile.
 */
export async function changeOwnPassword(
  deps: OwnAccountDeps,
  client: PortalClient,
  user: User,
  input: { current: unknown; password: unknown; sessionId?: string },
): Promise<number> {
  const password = toPortalPassword(input.password, user.email);
  await checkPassword(deps, client, user, input.current);
  const passwordHash = await hashPortalPassword(deps.hasher, password);
  return await orDeleted(deps.store.updatePortalPassword(user.id, {
    now: deps.clock.now(),
    passwordHash,
    mail: toPasswordChangedMail(client.links, user.email),
    keepSession: input.sessionId === undefined ? undefined : hashSecret(input.sessionId),
    audit: (ended: number) =>
      entry(deps, toPortalActor(user), "portal.password_changed", toUserRef(user.email), {
        tokens_revoked: ended,
      }),
  }));
}

/**
 * Deletes the user's account after checking the password: the user, its keys, tokens, codes
 * and sessions go in one transaction (each grant's end recorded as for any delete). The
 * deletion's audit entry names the account by an opaque id and its numeric user id, and in
 * the same transaction every earlier entry naming the account (by its e-mail while it held it,
 * or one it had before) takes that id instead, and the account's addresses in the details of
 * its entries and of those of its time (its keys' `key.created`, its tokens' `token.revoked`)
 * become that id too (the one exception to the append-only log, docs/security.md); the entry
 * counts the entries that took the id (`audit_rows_anonymized`). Its mail still in the outbox
 * goes as well.
 * @throws {AuthError} `invalid_credentials` for a wrong password, `too_many_attempts`.
 */
export async function deleteOwnAccount(
  deps: OwnAccountDeps,
  client: PortalClient,
  user: User,
  input: { password: unknown },
): Promise<DeletedUser> {
  await checkPassword(deps, client, user, input.password);
  const ref = generateDeletedRef();
  return await deps.store.deleteUser(user.id, {
    now: deps.clock.now(),
    anonymousRef: ref,
    anonymousActor: toPortalActor(user),
    // The throttle's counters keyed by the address go too (not only when they age out).
    forgetCounters: deps.throttle.countersOf(user.email),
    audit: (deleted: DeletedUser) =>
      entry(deps, toPortalActor(user), "portal.account_deleted", ref, {
        api_keys_deleted: deleted.apiKeys,
        tokens_deleted: deleted.tokens,
        audit_rows_anonymized: deleted.auditRows ?? 0,
      }),
  });
}
