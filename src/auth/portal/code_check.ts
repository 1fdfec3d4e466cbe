/**
 * Checking a mailed one-time code (verification, reset and a change of address): the user's
 * live code of the purpose, compared in constant time, a wrong one counted on the throttle's
 * code counters (and against a reset or e-mail code, dead after {@link MAX_CODE_ATTEMPTS}); at
 * verification, each candidate code with the pending password of the sign-up that made it.
 * Every failure is one uniform answer. One comparison and one way of counting for all three.
 *
 * @module
 */
import type { PortalCode, PortalCodePurpose, User } from "../../store/store.ts";
import { isPasswordSized } from "../account_rules.ts";
import { toUserRef } from "../audit.ts";
import { AuthError } from "../errors.ts";
import { refuseIfBusy } from "../login.ts";
import {
  entry,
  type PortalAccountDeps,
  type PortalClient,
  toAnonymousActor,
  toPortalActor,
  verifyPortalPassword,
} from "./account_deps.ts";
import { hashCode, isSameDigest, MAX_CODE_ATTEMPTS, normalizeCode } from "./codes.ts";
import { ignoreDeleted } from "./late_write.ts";
import { toPortalEmail } from "./mail_address.ts";

/** The uniform answer to a wrong, used, expired or unknown code. */
export function invalidCode(): AuthError {
  return new AuthError("invalid_request", "Invalid or expired code: ask for a new one");
}

/** What checking a code needs. */
export type CodeCheckDeps = Pick<
  PortalAccountDeps,
  "store" | "clock" | "hasher" | "throttle" | "codeKey"
>;

/**
 * Checks `code` against the user's live codes of `purpose` (one, but a verification may have
 * several candidates: one per sign-up while unverified, each with its own pending password).
 * Every live code is compared, in constant time. A code that matches none counts on the
 * throttle's code counters (the client's, and the e-mail × network one; never the sign-in
 * ceiling), and for a reset against the reset code too (dead after {@link MAX_CODE_ATTEMPTS});
 * it never counts against verification candidates, so strangers' guesses cannot end the
 * owner's code. With `verify` (verification), the matching code's pending password must match
 * too, checked whatever the code (the same work), and a wrong one counts against that code.
 * The throttle is checked before and again after the slow password check (parallel requests
 * all pass the first).
 * @throws {AuthError} `verify.refused()`, by default the uniform {@link invalidCode} answer;
 * `too_many_attempts`; `service_busy` while the password pool is busy (verification).
 */
export async function checkCode(
  deps: CodeCheckDeps,
  client: PortalClient,
  input: { email: string; code: unknown },
  purpose: "verify" | "reset",
  verify?: { password: unknown; refused: () => AuthError },
): Promise<{ user: User; codeId: number; email: string }> {
  const email = toPortalEmail(input.email);
  const code = typeof input.code === "string" ? normalizeCode(input.code) : undefined;
  if (verify !== undefined) refuseIfBusy(deps.hasher);
  await deps.throttle.check("code", client.address, email);
  const user = code === undefined ? undefined : await deps.store.findUserByEmail(email);
  const matched = await matchCode(deps, client, {
    user,
    email,
    purpose,
    digestOf: () => hashCode(email, code!, deps.codeKey),
    actor: toAnonymousActor(client),
    verify,
  });
  return { user: user!, codeId: matched.id, email };
}

/**
 * Checks the code a signed-in user was mailed at their new address (`requestEmailChange`):
 * as {@link checkCode}, on the same code counters (keyed by the account's address), a wrong
 * code also counted against the live code (dead after {@link MAX_CODE_ATTEMPTS}).
 * @throws {AuthError} the uniform {@link invalidCode} answer, `too_many_attempts`.
 */
export async function checkEmailChangeCode(
  deps: CodeCheckDeps,
  client: PortalClient,
  user: User,
  input: { code: unknown },
): Promise<PortalCode & { newEmail: string }> {
  const code = typeof input.code === "string" ? normalizeCode(input.code) : undefined;
  await deps.throttle.check("code", client.address, user.email);
  const matched = await matchCode(deps, client, {
    user,
    email: user.email,
    purpose: "email",
    digestOf: (stored) =>
      code === undefined || stored.newEmail === undefined
        ? undefined
        : hashCode(stored.newEmail, code, deps.codeKey),
    actor: toPortalActor(user),
  });
  if (matched.newEmail === undefined) throw invalidCode(); // an email code always has one
  return { ...matched, newEmail: matched.newEmail };
}

/**
 * The comparison and the counting {@link checkCode} and {@link checkEmailChangeCode} share:
 * `user`'s live codes of `purpose` against `digestOf`, the pending password with `verify`,
 * the throttle again, and a failure's one write and count. Resolves to the matching code.
 */
async function matchCode(
  deps: CodeCheckDeps,
  client: PortalClient,
  attempt: {
    user: User | undefined;
    /** The throttle's key: the address the code was asked for, or the signed-in account's. */
    email: string;
    purpose: PortalCodePurpose;
    digestOf: (stored: PortalCode) => Uint8Array | undefined;
    actor: string;
    verify?: { password: unknown; refused: () => AuthError };
  },
): Promise<PortalCode> {
  const { user, email, purpose, verify } = attempt;
  const refused = verify?.refused ?? invalidCode;
  // The same read without a user (an id no row has): known and unknown addresses alike.
  const live = (await deps.store.findPortalCodes(user?.id ?? 0, purpose, deps.clock.now()))
    .filter((stored) => user !== undefined && stored.attempts < MAX_CODE_ATTEMPTS);
  let matched: PortalCode | undefined;
  for (const stored of live) {
    // No early exit: every candidate is compared.
    const digest = attempt.digestOf(stored);
    if (digest !== undefined && isSameDigest(stored.codeHash, digest) && matched === undefined) {
      matched = stored;
    }
  }
  const passwordOk = verify === undefined ||
    await isPendingPassword(
      deps,
      matched && (matched.passwordHash ?? user?.passwordHash),
      verify.password,
    );
  await deps.throttle.check("code", client.address, email);
  if (user === undefined || matched === undefined || !passwordOk) {
    const audit = entry(
      deps,
      attempt.actor,
      "portal.code_failed",
      user === undefined ? "user:unknown" : toUserRef(email),
      { purpose },
    );
    // The same one write whoever the address is (an unknown one, one without a live code, or a
    // wrong code): /verify must not tell a pending address by its time. Verification
    // candidates are charged only for their own code with a wrong password; a reset or e-mail
    // code, which only its owner renews, for any.
    const against = matched?.id ??
      (purpose === "verify" ? [] : live.map((stored) => stored.id));
    // Only while the user exists (a deletion committing meanwhile leaves no row naming the
    // address); refused alike either way.
    const ofUser = user?.id;
    await ignoreDeleted(
      typeof against === "number" || against.length > 0
        ? deps.store.recordPortalCodeAttempt(against, { now: deps.clock.now(), audit, ofUser })
        : deps.store.appendAudit(audit, { ofUser }),
    );
    await deps.throttle.count("code", client.address, email);
    throw refused();
  }
  return matched;
}

/** Whether `password` matches `hash`; without a hash, the same work against a dummy hash. */
async function isPendingPassword(
  deps: CodeCheckDeps,
  hash: string | undefined,
  password: unknown,
): Promise<boolean> {
  const given = typeof password === "string" && isPasswordSized(password) ? password : "";
  const verified = await verifyPortalPassword(deps.hasher, hash, given || " ");
  return hash !== undefined && verified && given !== "";
}
