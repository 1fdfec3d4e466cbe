/**
 * Checking a mailed one-time code (verification and reset): the user's live code of the
 * purpose, compared in constant time, a wrong one counted against the code (dead after
 * {@link MAX_CODE_ATTEMPTS}) and the throttle; at verification, each candidate code with the
 * pending password of the sign-up that made it. Every failure is one uniform answer.
 *
 * @module
 */
import type { PortalCode, User } from "../../store/store.ts";
import { isPasswordSized, normalizeEmail } from "../account_rules.ts";
import { toUserRef } from "../audit.ts";
import { AuthError } from "../errors.ts";
import {
  entry,
  type PortalAccountDeps,
  type PortalClient,
  toAnonymousActor,
} from "./account_deps.ts";
import { hashCode, isSameDigest, MAX_CODE_ATTEMPTS, normalizeCode } from "./codes.ts";

/** The uniform answer to a wrong, used, expired or unknown code. */
export function invalidCode(): AuthError {
  return new AuthError("invalid_request", "Invalid or expired code: ask for a new one");
}

/**
 * Checks `code` against the user's live codes of `purpose` (one, but a verification may have
 * several candidates: one per sign-up while unverified, each with its own pending password).
 * Every live code is compared, in constant time; a wrong code counts against every live code
 * (dead after {@link MAX_CODE_ATTEMPTS}) and the client's counter. With `verify`
 * (verification), the matching code's pending password must match too, checked whatever the
 * code (the same work), and a wrong one counts as a wrong code against that code.
 * @throws {AuthError} `verify.refused()`, by default the uniform {@link invalidCode} answer.
 */
export async function checkCode(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; code: unknown },
  purpose: "verify" | "reset",
  verify?: { password: unknown; refused: () => AuthError },
): Promise<{ user: User; codeId: number; email: string }> {
  const refused = verify?.refused ?? invalidCode;
  const email = normalizeEmail(String(input.email ?? "")).slice(0, 254);
  const code = typeof input.code === "string" ? normalizeCode(input.code) : undefined;
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
  if (user === undefined || live.length === 0) {
    await deps.throttle.count("code", client.address, email);
    throw refused();
  }
  if (matched === undefined || !passwordOk) {
    await deps.store.recordPortalCodeAttempt(matched?.id ?? live.map((stored) => stored.id), {
      now: deps.clock.now(),
      audit: entry(deps, toAnonymousActor(client), "portal.code_failed", toUserRef(email), {
        purpose,
      }),
    });
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
  const verified = await deps.hasher.verify(hash, given || " ");
  return hash !== undefined && verified && given !== "";
}
