/**
 * Checking a mailed one-time code (verification and reset): the user's live code of the
 * purpose, compared in constant time, a wrong one counted on the throttle (and against a reset
 * code, dead after {@link MAX_CODE_ATTEMPTS}); at verification, each candidate code with the
 * pending password of the sign-up that made it. Every failure is one uniform answer.
 *
 * @module
 */
import type { PortalCode, User } from "../../store/store.ts";
import { isPasswordSized } from "../account_rules.ts";
import { toUserRef } from "../audit.ts";
import { AuthError } from "../errors.ts";
import { refuseIfBusy } from "../login.ts";
import {
  entry,
  type PortalAccountDeps,
  type PortalClient,
  toAnonymousActor,
  verifyPortalPassword,
} from "./account_deps.ts";
import { hashCode, isSameDigest, MAX_CODE_ATTEMPTS, normalizeCode } from "./codes.ts";
import { toPortalEmail } from "./mail_address.ts";

/** The uniform answer to a wrong, used, expired or unknown code. */
export function invalidCode(): AuthError {
  return new AuthError("invalid_request", "Invalid or expired code: ask for a new one");
}

/**
 * Checks `code` against the user's live codes of `purpose` (one, but a verification may have
 * several candidates: one per sign-up while unverified, each with its own pending password).
 * Every live code is compared, in constant time. A code that matches none counts on the
 * throttle only, and for a reset against the reset code too (dead after
 * {@link MAX_CODE_ATTEMPTS}); it never counts against verification candidates, so strangers'
 * guesses cannot end the owner's code. With `verify` (verification), the matching code's
 * pending password must match too, checked whatever the code (the same work), and a wrong one
 * counts against that code. The throttle is checked before and again after the slow password
 * check (parallel requests all pass the first).
 * @throws {AuthError} `verify.refused()`, by default the uniform {@link invalidCode} answer;
 * `too_many_attempts`; `service_busy` while the password pool is busy (verification).
 */
export async function checkCode(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; code: unknown },
  purpose: "verify" | "reset",
  verify?: { password: unknown; refused: () => AuthError },
): Promise<{ user: User; codeId: number; email: string }> {
  const refused = verify?.refused ?? invalidCode;
  const email = toPortalEmail(input.email);
  const code = typeof input.code === "string" ? normalizeCode(input.code) : undefined;
  if (verify !== undefined) refuseIfBusy(deps.hasher);
  await deps.throttle.check("code", client.address, email);
  const user = code === undefined ? undefined : await deps.store.findUserByEmail(email);
  const live = user === undefined
    ? []
    : (await deps.store.findPortalCodes(user.id, purpose, deps.clock.now()))
      .filter((stored) => stored.attempts < MAX_CODE_ATTEMPTS);
  const digest = user === undefined ? undefined : hashCode(email, code!, deps.codeKey);
  let matched: PortalCode | undefined;
  for (const stored of live) {
    // No early exit: every candidate is compared.
    if (isSameDigest(stored.codeHash, digest!) && matched === undefined) matched = stored;
  }
  const passwordOk = verify === undefined ||
    await isPendingPassword(
      deps,
      matched && (matched.passwordHash ?? user?.passwordHash),
      verify.password,
    );
  await deps.throttle.check("code", client.address, email);
  if (user === undefined || live.length === 0) {
    await deps.throttle.count("code", client.address, email);
    throw refused();
  }
  if (matched === undefined || !passwordOk) {
    const audit = entry(deps, toAnonymousActor(client), "portal.code_failed", toUserRef(email), {
      purpose,
    });
    // The same one write either way.
    const against = matched?.id ?? (purpose === "reset" ? live.map((stored) => stored.id) : []);
    if (typeof against === "number" || against.length > 0) {
      await deps.store.recordPortalCodeAttempt(against, { now: deps.clock.now(), audit });
    } else {
      await deps.store.appendAudit(audit);
    }
    await deps.throttle.count("code", client.address, email);
    throw refused();
  }
  return { user, codeId: matched.id, email };
}

/** Whether `password` matches `hash`; without a hash, the same work against a dummy hash. */
async function isPendingPassword(
  deps: PortalAccountDeps,
  hash: string | undefined,
  password: unknown,
): Promise<boolean> {
  const given = typeof password === "string" && isPasswordSized(password) ? password : "";
  const verified = await verifyPortalPassword(deps.hasher, hash, given || " ");
  return hash !== undefined && verified && given !== "";
}
