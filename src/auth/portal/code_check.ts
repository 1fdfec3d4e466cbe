/**
 * Checking a mailed one-time code (verification and reset): the user's live code of the
 * purpose, compared in constant time, a wrong one counted against the code (dead after
 * {@link MAX_CODE_ATTEMPTS}) and the throttle; at verification, with the account's pending
 * password. Every failure is one uniform answer.
 *
 * @module
 */
import type { User } from "../../store/store.ts";
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
 * Checks `code` against the user's live code of `purpose`, counting a wrong one against the
 * code (dead after {@link MAX_CODE_ATTEMPTS}) and the client's counter. With `verify`
 * (verification), the account's pending password must match too, checked whatever the code
 * (the same work), and a wrong one counts as a wrong code.
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
  const stored = user && await deps.store.findPortalCode(user.id, purpose, deps.clock.now());
  const passwordOk = verify === undefined ||
    await isPendingPassword(deps, stored && user, verify.password);
  if (user === undefined || stored === undefined || stored.attempts >= MAX_CODE_ATTEMPTS) {
    await deps.throttle.count("code", client.address, email);
    throw refused();
  }
  if (!isSameDigest(stored.codeHash, hashCode(email, code!)) || !passwordOk) {
    await deps.store.recordPortalCodeAttempt(stored.id, {
      now: deps.clock.now(),
      audit: entry(deps, toAnonymousActor(client), "portal.code_failed", toUserRef(email), {
        purpose,
      }),
    });
    await deps.throttle.count("code", client.address, email);
    throw refused();
  }
  return { user, codeId: stored.id, email };
}

/** Whether `password` is `user`'s; without a user, the same work against a dummy hash. */
async function isPendingPassword(
  deps: PortalAccountDeps,
  user: User | undefined,
  password: unknown,
): Promise<boolean> {
  const given = typeof password === "string" && isPasswordSized(password) ? password : "";
  const verified = await deps.hasher.verify(user?.passwordHash, given || " ");
  return user !== undefined && verified && given !== "";
}
