/**
 * Portal sessions: sign-in (every failure the same `invalid_credentials` after the same
 * work), the session a verification or sign-in opens, the signed-in user of a session id, and
 * sign-out. A session id is stored only as its SHA-256.
 *
 * @module
 */
import type { Clock } from "../../platform/clock.ts";
import { StoreConflict } from "../../store/errors.ts";
import type { Store, User } from "../../store/store.ts";
import { isPasswordSized } from "../account_rules.ts";
import { toUserRef } from "../audit.ts";
import { hashSecret } from "../credentials.ts";
import { AuthError } from "../errors.ts";
import { refuseIfBusy } from "../login.ts";
import {
  entry,
  findAccount,
  isActive,
  type PortalAccountDeps,
  type PortalClient,
  toAnonymousActor,
  toPortalActor,
  verifyPortalPassword,
} from "./account_deps.ts";
import { generateSessionId, isSessionIdShaped } from "./codes.ts";
import { toPortalEmail } from "./mail_address.ts";
import { ignoreDeleted } from "./late_write.ts";

/** How long a portal session lasts. */
export const SESSION_MS = 8 * 3_600_000;

/** A session just opened: its id (for the cookie; only its digest is stored) and expiry. */
export interface OpenedSession {
  sessionId: string;
  expiresAt: number;
}

/**
 * Opens a session for a user who just proved their password; the client's network becomes
 * known to the throttle for the address (portal_throttle.ts).
 * @throws {StoreConflict} when the user was deleted meanwhile (nothing written).
 */
export async function openSession(
  deps: PortalAccountDeps,
  client: PortalClient,
  user: User,
): Promise<OpenedSession> {
  const sessionId = generateSessionId();
  const now = deps.clock.now();
  const expiresAt = now + SESSION_MS;
  await deps.store.insertPortalSession(hashSecret(sessionId), {
    now,
    userId: user.id,
    expiresAt,
    audit: entry(deps, toPortalActor(user), "portal.signed_in", toUserRef(user.email), {
      client: client.address,
    }),
  });
  await deps.throttle.succeeded(client.address, user.email);
  return { sessionId, expiresAt };
}

/**
 * Sign-in with e-mail and password; resolves to a new session. Every failure (unknown
 * address, wrong password, unverified or unapproved account, disabled user) is the same
 * `invalid_credentials` after the same work. While the password pool would refuse the check,
 * `service_busy` before any work; while the throttle blocks, before or after the password check,
 * `too_many_attempts` whatever the password.
 */
export async function signIn(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; password: unknown },
  signal?: AbortSignal,
): Promise<OpenedSession> {
  const email = toPortalEmail(input.email);
  refuseIfBusy(deps.hasher);
  const found = await findAccount(deps.store, email);
  const usable = isActive(found, deps) ? found.user : undefined;
  const verified = await checkSignInPassword(
    deps,
    { ...client, signal: signal ?? client.signal },
    { email, hash: usable?.passwordHash, password: input.password },
  );
  if (!verified || usable === undefined) {
    // Named only while the user exists (a deletion committing meanwhile leaves no row naming
    // the address); the answer is the same either way.
    await ignoreDeleted(deps.store.appendAudit(
      entry(
        deps,
        toAnonymousActor(client),
        "portal.sign_in_failed",
        found ? toUserRef(email) : "user:unknown",
        {
          reason: found === undefined
            ? "unknown_user"
            : usable === undefined
            ? "not_active"
            : "wrong_password",
        },
      ),
      { ofUser: found?.user.id },
    ));
    throw invalidSignIn();
  }
  try {
    return await openSession(deps, client, usable);
  } catch (error) {
    // The user was deleted since it was read: answered as an unknown address is.
    if (error instanceof StoreConflict) throw invalidSignIn();
    throw error;
  }
}

/** The one answer to a sign-in refused for any reason. */
function invalidSignIn(): AuthError {
  return new AuthError(
    "invalid_credentials",
    "Invalid e-mail or password, or the account is not active yet",
  );
}

/**
 * The password step of sign-in, and of a signed-in user's current-password checks
 * (own_account.ts): refused while the pool is busy, then the throttle checked before the slow
 * check and again after it, as at the token endpoint (requests in flight together all passed
 * the first check, and the failures of those that finished first may block this one by now: a
 * blocked request gets the throttle's answer, right password or wrong); a failure counts as a
 * failed sign-in. A password of the wrong size, or no hash (no usable account), is a failure
 * after the same work (a dummy hash). The client's abort signal stops the check.
 * @throws {AuthError} `service_busy`, `too_many_attempts`, `request_aborted`.
 */
export async function checkSignInPassword(
  deps: Pick<PortalAccountDeps, "hasher" | "throttle">,
  client: Pick<PortalClient, "address" | "signal">,
  attempt: { email: string; hash: string | undefined; password: unknown },
): Promise<boolean> {
  const { email, hash } = attempt;
  const given = typeof attempt.password === "string" && isPasswordSized(attempt.password)
    ? attempt.password
    : "";
  refuseIfBusy(deps.hasher);
  await deps.throttle.check("signIn", client.address, email);
  const verified = await verifyPortalPassword(deps.hasher, hash, given || " ", client.signal);
  await deps.throttle.check("signIn", client.address, email);
  const ok = hash !== undefined && verified && given !== "";
  if (!ok) await deps.throttle.count("signIn", client.address, email);
  return ok;
}

/**
 * The signed-in user of a session id, if the session is live and the account may still sign
 * in ({@link isActive}: the rules of enrolment apply to open sessions too, so turning
 * `--portal-existing-users` off or removing a domain ends them).
 */
export async function findSessionUser(
  deps: Pick<PortalAccountDeps, "store" | "clock" | "mode" | "domains" | "existingUsers">,
  sessionId: string,
): Promise<{ user: User; expiresAt: number } | undefined> {
  if (!isSessionIdShaped(sessionId)) return undefined;
  // One read: the session, its user and the user's account.
  const found = await deps.store.findPortalSessionUser(hashSecret(sessionId), deps.clock.now());
  if (found === undefined) return undefined;
  const { user, account, session } = found;
  if (!isActive({ user, account }, deps)) return undefined;
  return { user, expiresAt: session.expiresAt };
}

/** Ends a session (sign-out). */
export async function signOut(
  deps: { store: Store; clock: Clock },
  user: User,
  sessionId: string,
): Promise<void> {
  await deps.store.deletePortalSession(hashSecret(sessionId), {
    now: deps.clock.now(),
    audit: (ended: boolean) =>
      ended
        ? entry(deps, toPortalActor(user), "portal.signed_out", toUserRef(user.email))
        : undefined,
  });
}
