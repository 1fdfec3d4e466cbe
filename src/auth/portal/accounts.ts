/**
 * The portal's account lifecycle: sign up, verify an e-mail (and sign in, in one step), and an
 * operator's approval. Sessions are in sessions.ts, password reset in password_reset.ts, what
 * they share in account_deps.ts. Each change is one atomic, audited store call that queues its
 * mail in the same transaction (the outbox, src/server/start_mailer.ts).
 *
 * No enumeration: sign-up, sign-in and forgot-password return the same for an e-mail with an
 * account and one without, after the same work. Sign-up always hashes the password and writes
 * once (a new account, or a notice to the address that already has one); sign-in verifies
 * against a dummy hash when there is no usable account; forgot-password counts the request
 * (the throttle's write) for every address, answers, and then (`defer`) queues a code only
 * for an active account (password_reset.ts). What differs is in the mailbox, which only the
 * address's owner reads. The price: a process stopped between forgot-password's answer and its
 * deferred queueing loses that one mail (the user asks again); every other mail is queued in
 * its change's transaction, before the answer.
 *
 * @module
 */
import { StoreConflict } from "../../store/errors.ts";
import type { NewMail, NewPortalCode, PortalAccount, User } from "../../store/store.ts";
import { toUserRef } from "../audit.ts";
import type { ChangeDeps } from "../changes.ts";
import { AuthError } from "../errors.ts";
import { refuseIfBusy } from "../login.ts";
import {
  entry,
  findAccount,
  hashPortalPassword,
  type PortalAccountDeps,
  type PortalClient,
  toAnonymousActor,
} from "./account_deps.ts";
import { requireWaitingAccount } from "./approval.ts";
import { checkCode } from "./code_check.ts";
import { generateCode, hashCode } from "./codes.ts";
import { ignoreDeleted } from "./late_write.ts";
import { isAllowedDomain, toMailboxEmail } from "./mail_address.ts";
import {
  type MailLinks,
  toAlreadyRegisteredMail,
  toApprovedMail,
  toVerifyMail,
} from "./portal_mail.ts";
import { toPortalPassword } from "./portal_password.ts";
import { toPortalNetwork } from "./portal_throttle.ts";
import { type OpenedSession, openSession } from "./sessions.ts";

/** How long a verification code works. */
export const VERIFY_CODE_MS = 24 * 3_600_000;
/**
 * Live verification codes an unverified address keeps from one client network (an IPv4
 * address's /24, an IPv6 one's /64): each sign-up adds one (with its own password) and ends
 * its own network's oldest beyond this, so one network's sign-ups cannot end another's code.
 */
export const MAX_VERIFY_CANDIDATES_PER_NETWORK = 3;
/**
 * Live verification codes an unverified address keeps in all: beyond this a sign-up ends the
 * oldest of any network (more networks than this, within the mail ceiling, could end the
 * owner's; the owner's own sign-up, throttled per network, then gets a new one).
 */
export const MAX_VERIFY_CANDIDATES = 20;

/** @throws {AuthError} `forbidden` when the sign-up mode refuses the address (by itself). */
function checkMode(deps: PortalAccountDeps, email: string): void {
  if (deps.mode === "invite") {
    throw new AuthError("forbidden", "Sign-up is by invitation: ask the operator for an account");
  }
  if (!isAllowedDomain(email, deps)) {
    throw new AuthError("forbidden", "Sign-up is open to some e-mail domains only, not this one");
  }
}

/**
 * Sign-up. Resolves the same way whether the address has an account or not: a new account
 * gets a verification code, a pending one a new candidate code bound to the new password
 * (earlier candidates stay, up to {@link MAX_VERIFY_CANDIDATES_PER_NETWORK} per client network
 * and {@link MAX_VERIFY_CANDIDATES} in all), an existing one a notice;
 * each by mail.
 *
 * @throws {AuthError} `invalid_request` for the e-mail or password, `forbidden` when the mode
 * refuses the address (decided by the address alone), `too_many_attempts`, `service_busy` while
 * the password pool is busy (before anything is counted or read).
 */
export async function signUp(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; password: unknown },
): Promise<void> {
  const email = toMailboxEmail(input.email);
  const password = toPortalPassword(input.password, email);
  checkMode(deps, email);
  refuseIfBusy(deps.hasher);
  await deps.throttle.check("mail", client.address, email);
  await deps.throttle.count("mail", client.address, email);
  // Hashed whoever has the address: the same work for both answers.
  const passwordHash = await hashPortalPassword(deps.hasher, password);
  const now = deps.clock.now();
  const found = await findAccount(deps.store, email);
  const actor = toAnonymousActor(client);
  const attempt = { email, passwordHash, now, actor };
  if (found !== undefined) return await signUpAgain(deps, client, found, attempt);
  // Twice at most: an address signed up meanwhile by another request and deleted again before
  // it is read back is free once more.
  for (let tries = 1;; tries++) {
    try {
      await deps.store.insertPortalUser({ email, passwordHash, tokenTimeoutSeconds: null }, {
        now,
        state: "pending_verification",
        ...toCandidate(deps, client, attempt),
        audit: (user: User) =>
          entry(deps, actor, "portal.signed_up", toUserRef(user.email), { user_id: user.id }),
      });
      return;
    } catch (error) {
      if (!(error instanceof StoreConflict)) throw error;
      // Signed up meanwhile by another request: this one is a repeated sign-up of that account
      // (a candidate code beside the other's), never silently dropped.
      const raced = await findAccount(deps.store, email);
      if (raced !== undefined) return await signUpAgain(deps, client, raced, attempt);
      if (tries === 2) throw error;
    }
  }
}

/** A new verification code bound to the sign-up's password and network, and its mail. */
function toCandidate(
  deps: PortalAccountDeps,
  client: PortalClient,
  attempt: { email: string; passwordHash: string; now: number },
): { code: NewPortalCode; mail: NewMail } {
  const code = generateCode();
  return {
    code: {
      purpose: "verify",
      codeHash: hashCode(attempt.email, code, deps.codeKey),
      expiresAt: attempt.now + VERIFY_CODE_MS,
      passwordHash: attempt.passwordHash,
      network: toPortalNetwork(client.address),
    },
    mail: toVerifyMail(client.links, attempt.email, code),
  };
}

/**
 * A sign-up of an address that has a user: a pending one gets a new candidate code bound to
 * the new password, any other a notice; each by mail.
 */
async function signUpAgain(
  deps: PortalAccountDeps,
  client: PortalClient,
  found: { user: User; account?: PortalAccount },
  attempt: { email: string; passwordHash: string; now: number; actor: string },
): Promise<void> {
  const { email, now, actor } = attempt;
  if (found.account?.state === "pending_verification") {
    // A candidate beside the earlier ones: whoever signed up before keeps their code and
    // password (a stranger's network ends only its own candidates, never the owner's), and a
    // code works only with its own password.
    // A deletion committing meanwhile: nothing is written, and the answer stays the one every
    // sign-up gets.
    await ignoreDeleted(deps.store.addPortalCode(found.user.id, {
      now,
      ...toCandidate(deps, client, attempt),
      keep: MAX_VERIFY_CANDIDATES,
      keepPerNetwork: MAX_VERIFY_CANDIDATES_PER_NETWORK,
      audit: entry(deps, actor, "portal.sign_up_repeated", toUserRef(email)),
    }));
    return;
  }
  // Only while the user exists: a deletion committing meanwhile leaves no notice to the
  // address nor a row naming it, and the answer stays the one every sign-up gets.
  await ignoreDeleted(deps.store.insertMail(toAlreadyRegisteredMail(client.links, email), {
    now,
    audit: entry(deps, actor, "portal.sign_up_repeated", toUserRef(email)),
    ofUser: found.user.id,
  }));
}

/** The uniform answer to a verification refused for any reason (see {@link verifyEmail}). */
export function invalidVerification(): AuthError {
  return new AuthError(
    "invalid_request",
    "Invalid or expired code, or not the password you signed up with: sign up again for a new code",
  );
}

/** What a verification did: the account's new state, and a session when it is active. */
export type Verified =
  | { state: "active"; session: OpenedSession }
  | { state: "pending_approval" };

/**
 * Verifies an e-mail with its code and the password the account was signed up with, and
 * signs in, in one step: the account becomes active (and a session opens), or waits for an
 * operator in `approval` mode. The password defeats pre-hijacking: each code works only with
 * the password of the sign-up that made it, so whoever signed the address up first cannot
 * have its owner's code activate an account with their password; and a later sign-up adds a
 * candidate instead of ending earlier ones, so neither can a stranger's sign-up end the
 * owner's code. The code's password becomes the user's.
 * A user an operator disabled is refused, and stays disabled.
 * @throws {AuthError} `invalid_request` ({@link invalidVerification}) for a wrong, used or
 * expired code, a wrong password, or a disabled user, alike.
 */
export async function verifyEmail(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; code: unknown; password: unknown },
): Promise<Verified> {
  const { user, codeId, email } = await checkCode(
    deps,
    client,
    input,
    "verify",
    { password: input.password, refused: invalidVerification },
  );
  const account = await deps.store.findPortalAccount(user.id);
  if (account?.state !== "pending_verification" || (user.disabled && !account.userHeld)) {
    // Disabled by an operator (or no longer waiting): refused as a wrong code, never enabled.
    await deps.throttle.count("code", client.address, email);
    throw invalidVerification();
  }
  const state = deps.mode === "approval" ? "pending_approval" : "active";
  try {
    await deps.store.usePortalCode(codeId, {
      now: deps.clock.now(),
      state,
      audit: entry(deps, toAnonymousActor(client), "portal.verified", toUserRef(email), {
        user_id: user.id,
        state,
      }),
    });
  } catch (error) {
    if (error instanceof StoreConflict) throw invalidVerification();
    throw error;
  }
  if (state === "pending_approval") return { state };
  try {
    return { state, session: await openSession(deps, client, user) };
  } catch (error) {
    // The user was deleted since the code was spent.
    if (error instanceof StoreConflict) throw invalidVerification();
    throw error;
  }
}

/**
 * An operator approves an account waiting in `approval` mode: it becomes active and its user
 * is mailed.
 * @throws {AuthError} `not_found` without such an account, `conflict` unless it waits.
 */
export async function approveAccount(
  deps: ChangeDeps,
  user: User,
  links: MailLinks,
): Promise<void> {
  await requireWaitingAccount(deps, user, "approve");
  try {
    // Checked again in the write's transaction: a refusal (a deletion) or another approval
    // between the check above and the write must not be answered with an "approved" mail.
    await deps.store.updatePortalState(user.id, {
      now: deps.clock.now(),
      state: "active",
      from: "pending_approval",
      mail: toApprovedMail(links, user.email),
      audit: entry(deps, deps.actor, "portal.approved", toUserRef(user.email)),
    });
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    await requireWaitingAccount(deps, user, "approve");
    throw new AuthError("conflict", `Cannot approve ${user.email}: the account changed meanwhile`);
  }
}
