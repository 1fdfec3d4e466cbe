/**
 * Forgot-password and reset: a code by mail to an active account (nothing to any other
 * address, after the same answer: the account-dependent work runs after it, `defer`), then a
 * new password with the code, which ends every token and portal session and mails a notice.
 * A process stopped between forgot-password's answer and its deferred queueing loses that one
 * mail (the user asks again).
 *
 * @module
 */
import { ignoreDeleted } from "./late_write.ts";
import { StoreConflict } from "../../store/errors.ts";
import { toUserRef } from "../audit.ts";
import { refuseIfBusy } from "../login.ts";
import {
  entry,
  findAccount,
  hashPortalPassword,
  isActive,
  type PortalAccountDeps,
  type PortalClient,
  toAnonymousActor,
} from "./account_deps.ts";
import { checkCode, invalidCode } from "./code_check.ts";
import { generateCode, hashCode } from "./codes.ts";
import { toMailboxEmail, toPortalEmail } from "./mail_address.ts";
import { toPasswordChangedMail, toResetMail } from "./portal_mail.ts";
import { toPortalPassword } from "./portal_password.ts";

/** How long a reset code works. */
export const RESET_CODE_MS = 3_600_000;
/**
 * Forgot-password: an active account gets a reset code by mail; any other address nothing.
 * Resolves the same either way (see @module).
 */
export async function requestPasswordReset(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string },
): Promise<void> {
  const email = toMailboxEmail(String(input.email ?? ""));
  await deps.throttle.check("mail", client.address, email);
  await deps.throttle.count("mail", client.address, email);
  const queueCode = async () => {
    const found = await findAccount(deps.store, email);
    if (!isActive(found, deps)) return;
    const code = generateCode();
    const now = deps.clock.now();
    // A deletion committing meanwhile: nothing is written or mailed, as for an unknown address.
    await ignoreDeleted(deps.store.replacePortalCode(found.user.id, {
      now,
      code: {
        purpose: "reset",
        codeHash: hashCode(email, code, deps.codeKey),
        expiresAt: now + RESET_CODE_MS,
      },
      mail: toResetMail(client.links, email, code),
      audit: entry(deps, toAnonymousActor(client), "portal.reset_requested", toUserRef(email)),
    }));
  };
  if (deps.defer === undefined) await queueCode();
  else deps.defer(queueCode);
}

/**
 * Sets a new password with a reset code, for an account that may still use the portal
 * ({@link isActive}): every token of the user ends (the revoke-all cutoff), every portal
 * session too, and a notice is mailed. Resolves to how many live tokens ended.
 * @throws {AuthError} `invalid_request` for the password or a wrong, used or expired code,
 * `too_many_attempts`, `service_busy` while the password pool is busy.
 */
export async function resetPassword(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; code: unknown; password: unknown },
): Promise<number> {
  const email = toPortalEmail(input.email);
  const password = toPortalPassword(input.password, email);
  refuseIfBusy(deps.hasher);
  const { user, codeId } = await checkCode(deps, client, input, "reset");
  // The rules of enrolment apply when the code is used too, not only when it was asked for
  // (`--portal-existing-users` turned off, a domain removed, the user disabled meanwhile).
  const account = await deps.store.findPortalAccount(user.id);
  if (!isActive({ user, account }, deps)) throw invalidCode();
  const passwordHash = await hashPortalPassword(deps.hasher, password);
  try {
    return await deps.store.usePortalCode(codeId, {
      now: deps.clock.now(),
      passwordHash,
      mail: toPasswordChangedMail(client.links, email),
      audit: (ended: number) =>
        entry(deps, toAnonymousActor(client), "portal.password_reset", toUserRef(email), {
          user_id: user.id,
          tokens_revoked: ended,
        }),
    });
  } catch (error) {
    if (error instanceof StoreConflict) throw invalidCode();
    throw error;
  }
}
