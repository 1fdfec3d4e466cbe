/**
 * The portal's account use cases: sign up, verify an e-mail, sign in and out, forgot and
 * reset a password, and an operator's approval. Each change is one atomic, audited store call
 * that queues its mail in the same transaction (the outbox, src/server/start_mailer.ts).
 *
 * No enumeration: sign-up, sign-in and forgot-password return the same for an e-mail with an
 * account and one without, after the same work. Sign-up always hashes the password and writes
 * once (a new account, or a notice to the address that already has one); sign-in verifies
 * against a dummy hash when there is no usable account; forgot-password counts the request
 * (the throttle's write) for every address, answers, and then (`defer`) queues a code only
 * for an active account. What
 * differs is in the mailbox, which only the address's owner reads. The price: a process stopped
 * between forgot-password's answer and its deferred queueing loses that one mail (the user asks
 * again); every other mail is queued in its change's transaction, before the answer.
 *
 * @module
 */
import type { PasswordHasher } from "../../passwords/passwords.ts";
import type { Clock } from "../../platform/clock.ts";
import { StoreConflict } from "../../store/errors.ts";
import type { AuditEntry, PortalAccount, Store, User } from "../../store/store.ts";
import { isPasswordSized, MAX_PASSWORD_BYTES, normalizeEmail } from "../account_rules.ts";
import { type AuditAction, toUserRef } from "../audit.ts";
import type { ChangeDeps } from "../changes.ts";
import { hashSecret } from "../credentials.ts";
import { AuthError } from "../errors.ts";
import {
  generateCode,
  generateSessionId,
  hashCode,
  isSameDigest,
  isSessionIdShaped,
  MAX_CODE_ATTEMPTS,
  normalizeCode,
} from "./codes.ts";
import { isCommonPassword, MIN_PORTAL_PASSWORD_LENGTH } from "./common_passwords.ts";
import { toMailboxEmail } from "./mail_address.ts";
import {
  type MailLinks,
  toAlreadyRegisteredMail,
  toApprovedMail,
  toPasswordChangedMail,
  toResetMail,
  toVerifyMail,
} from "./portal_mail.ts";
import type { PortalThrottle } from "./portal_throttle.ts";

/** Who may open an account (see `--portal-mode`). */
export type SignUpMode = "open" | "domains" | "approval" | "invite";

/** How long a verification code works. */
export const VERIFY_CODE_MS = 24 * 3_600_000;
/** How long a reset code works. */
export const RESET_CODE_MS = 3_600_000;
/** How long a portal session lasts. */
export const SESSION_MS = 8 * 3_600_000;

/** What the account use cases need. */
export interface PortalAccountDeps {
  store: Store;
  clock: Clock;
  hasher: Pick<PasswordHasher, "hash" | "verify">;
  throttle: PortalThrottle;
  mode: SignUpMode;
  /** `domains` mode: the domains that may sign up. */
  domains?: readonly string[];
  /**
   * Runs work whose cost depends on whether an account exists after the answer is sent
   * (forgot-password's code and mail), so that the answer's timing cannot tell. Default: now.
   */
  defer?(task: () => Promise<void>): void;
}

/** The request's facts the use cases read. */
export interface PortalClient {
  /** The client's address, for the throttle and the audit log. */
  address: string;
  /** Where links in mail point. */
  links: MailLinks;
}

/** A session just opened: its id (for the cookie; only its digest is stored) and expiry. */
export interface OpenedSession {
  sessionId: string;
  expiresAt: number;
}

/** An audit entry now (exported for the other portal use cases). */
export function entry(
  deps: { clock: Clock },
  actor: string,
  action: AuditAction,
  subject: string,
  detail: Record<string, string | number | null> = {},
): AuditEntry {
  return { at: deps.clock.now(), actor, action, subject, detail };
}

function anonymous(client: PortalClient): string {
  return `portal:${client.address}`.slice(0, 128);
}

/** The actor of a signed-in user's changes. */
export function toPortalActor(user: Pick<User, "id">): string {
  return `portal:user:${user.id}`;
}

/** The audit dependencies of a signed-in user's change. */
export function toPortalChangeDeps(deps: { store: Store; clock: Clock }, user: User): ChangeDeps {
  return { store: deps.store, clock: deps.clock, actor: toPortalActor(user) };
}

/**
 * A new password for a portal account: the login bounds, at least
 * {@link MIN_PORTAL_PASSWORD_LENGTH} characters, not on the shipped list of common passwords
 * and not the e-mail address.
 *
 * @throws {AuthError} `invalid_request` saying which rule failed.
 */
export function toPortalPassword(password: unknown, email: string): string {
  if (typeof password !== "string" || !isPasswordSized(password)) {
    throw new AuthError(
      "invalid_request",
      `Invalid password: expected 1 to ${MAX_PASSWORD_BYTES} bytes`,
    );
  }
  if ([...password].length < MIN_PORTAL_PASSWORD_LENGTH) {
    throw new AuthError(
      "invalid_request",
      `Invalid password: expected at least ${MIN_PORTAL_PASSWORD_LENGTH} characters`,
    );
  }
  const lower = password.toLowerCase();
  if (isCommonPassword(password) || lower === email || lower === email.split("@")[0]) {
    throw new AuthError(
      "invalid_request",
      "Invalid password: it is too common or too easy to guess",
    );
  }
  return password;
}

function checkMode(deps: PortalAccountDeps, email: string): void {
  if (deps.mode === "invite") {
    throw new AuthError("forbidden", "Sign-up is by invitation: ask the operator for an account");
  }
  if (deps.mode === "domains") {
    const domain = email.slice(email.lastIndexOf("@") + 1);
    if (!(deps.domains ?? []).includes(domain)) {
      throw new AuthError("forbidden", "Sign-up is open to some e-mail domains only, not this one");
    }
  }
}

/** The user with this e-mail and its portal account (`undefined` for an operator's user). */
async function findAccount(
  store: Store,
  email: string,
): Promise<{ user: User; account?: PortalAccount } | undefined> {
  const user = await store.findUserByEmail(email);
  if (user === undefined) return undefined;
  return { user, account: await store.findPortalAccount(user.id) };
}

/** Whether a user may sign in and manage keys: enabled, and its account (if any) active. */
function isActive(
  found: { user: User; account?: PortalAccount } | undefined,
): found is { user: User; account?: PortalAccount } {
  return found !== undefined && !found.user.disabled &&
    (found.account === undefined || found.account.state === "active");
}

/**
 * Sign-up. Resolves the same way whether the address has an account or not: a new account
 * gets a verification code, a pending one a new code (and the new password), an existing one
 * a notice; each by mail.
 *
 * @throws {AuthError} `invalid_request` for the e-mail or password, `forbidden` when the mode
 * refuses the address (decided by the address alone), `too_many_attempts`.
 */
export async function signUp(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; password: unknown },
): Promise<void> {
  const email = toMailboxEmail(input.email);
  const password = toPortalPassword(input.password, email);
  checkMode(deps, email);
  await deps.throttle.check("mail", client.address, email);
  await deps.throttle.count("mail", client.address, email);
  // Hashed whoever has the address: the same work for both answers.
  const passwordHash = await deps.hasher.hash(password);
  const now = deps.clock.now();
  const found = await findAccount(deps.store, email);
  const actor = anonymous(client);
  if (found === undefined) {
    const code = generateCode();
    try {
      await deps.store.insertPortalUser({ email, passwordHash, tokenTimeoutSeconds: null }, {
        now,
        state: "pending_verification",
        code: {
          purpose: "verify",
          codeHash: hashCode(email, code),
          expiresAt: now + VERIFY_CODE_MS,
        },
        mail: toVerifyMail(client.links, email, code),
        audit: (user: User) =>
          entry(deps, actor, "portal.signed_up", toUserRef(user.email), { user_id: user.id }),
      });
    } catch (error) {
      // Signed up meanwhile by another request, which mailed.
      if (!(error instanceof StoreConflict)) throw error;
    }
    return;
  }
  if (found.account?.state === "pending_verification") {
    const code = generateCode();
    await deps.store.replacePortalCode(found.user.id, {
      now,
      code: { purpose: "verify", codeHash: hashCode(email, code), expiresAt: now + VERIFY_CODE_MS },
      mail: toVerifyMail(client.links, email, code),
      passwordHash,
      audit: entry(deps, actor, "portal.sign_up_repeated", toUserRef(email)),
    });
    return;
  }
  await deps.store.insertMail(toAlreadyRegisteredMail(client.links, email), {
    now,
    audit: entry(deps, actor, "portal.sign_up_repeated", toUserRef(email)),
  });
}

/** The uniform answer to a wrong, used, expired or unknown code. */
export function invalidCode(): AuthError {
  return new AuthError("invalid_request", "Invalid or expired code: ask for a new one");
}

/** The uniform answer to a verification refused for any reason (see {@link verifyEmail}). */
export function invalidVerification(): AuthError {
  return new AuthError(
    "invalid_request",
    "Invalid or expired code, or not the password you signed up with: sign up again for a new code",
  );
}

/**
 * Checks `code` against the user's live code of `purpose`, counting a wrong one against the
 * code (dead after {@link MAX_CODE_ATTEMPTS}) and the client's counter. With `verify`
 * (verification), the account's pending password must match too, checked whatever the code
 * (the same work), and a wrong one counts as a wrong code.
 * @throws {AuthError} `verify.refused()`, by default the uniform {@link invalidCode} answer.
 */
async function checkCode(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; code: unknown },
  purpose: "verify" | "reset",
  verify?: { password: unknown; refused: () => AuthError },
): Promise<{ user: User; codeId: number; email: string }> {
  const refused = verify?.refused ?? invalidCode;
  const email = normalizeEmail(String(input.email ?? "")).slice(0, 254);
  const code = typeof input.code === "string" ? normalizeCode(input.code) : undefined;
  await deps.throttle.check("signIn", client.address, email);
  const user = code === undefined ? undefined : await deps.store.findUserByEmail(email);
  const stored = user && await deps.store.findPortalCode(user.id, purpose, deps.clock.now());
  const passwordOk = verify === undefined ||
    await isPendingPassword(deps, stored && user, verify.password);
  if (user === undefined || stored === undefined || stored.attempts >= MAX_CODE_ATTEMPTS) {
    await deps.throttle.count("signIn", client.address, email);
    throw refused();
  }
  if (!isSameDigest(stored.codeHash, hashCode(email, code!)) || !passwordOk) {
    await deps.store.recordPortalCodeAttempt(stored.id, {
      now: deps.clock.now(),
      audit: entry(deps, anonymous(client), "portal.code_failed", toUserRef(email), { purpose }),
    });
    await deps.throttle.count("signIn", client.address, email);
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

/** What a verification did: the account's new state, and a session when it is active. */
export type Verified =
  | { state: "active"; session: OpenedSession }
  | { state: "pending_approval" };

/**
 * Verifies an e-mail with its code and the password the account was signed up with, and
 * signs in, in one step: the account becomes active (and a session opens), or waits for an
 * operator in `approval` mode. The password defeats pre-hijacking: whoever signed the address
 * up first cannot have its owner's click activate an account with their password; the owner
 * signs up again (a new password, and every earlier code ends) and verifies with that.
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
    await deps.throttle.count("signIn", client.address, email);
    throw invalidVerification();
  }
  const state = deps.mode === "approval" ? "pending_approval" : "active";
  try {
    await deps.store.usePortalCode(codeId, {
      now: deps.clock.now(),
      state,
      audit: entry(deps, anonymous(client), "portal.verified", toUserRef(email), {
        user_id: user.id,
        state,
      }),
    });
  } catch (error) {
    if (error instanceof StoreConflict) throw invalidVerification();
    throw error;
  }
  if (state === "pending_approval") return { state };
  return { state, session: await openSession(deps, client, user) };
}

/** Opens a session for a user who just proved their password. */
async function openSession(
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
  return { sessionId, expiresAt };
}

/**
 * Sign-in with e-mail and password; resolves to a new session. Every failure (unknown
 * address, wrong password, unverified or unapproved account, disabled user) is the same
 * `invalid_credentials` after the same work.
 */
export async function signIn(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; password: unknown },
  signal?: AbortSignal,
): Promise<OpenedSession> {
  const email = normalizeEmail(String(input.email ?? "")).slice(0, 254);
  const password = typeof input.password === "string" && isPasswordSized(input.password)
    ? input.password
    : "";
  await deps.throttle.check("signIn", client.address, email);
  const found = await findAccount(deps.store, email);
  const usable = isActive(found) ? found.user : undefined;
  const verified = await deps.hasher.verify(usable?.passwordHash, password || " ", signal);
  if (usable === undefined || !verified || password === "") {
    await deps.throttle.count("signIn", client.address, email);
    await deps.store.appendAudit(
      entry(
        deps,
        anonymous(client),
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
    );
    throw new AuthError(
      "invalid_credentials",
      "Invalid e-mail or password, or the account is not active yet",
    );
  }
  return await openSession(deps, client, usable);
}

/** The signed-in user of a session id, if the session is live and the account usable. */
export async function findSessionUser(
  deps: { store: Store; clock: Clock },
  sessionId: string,
): Promise<{ user: User; expiresAt: number } | undefined> {
  if (!isSessionIdShaped(sessionId)) return undefined;
  const session = await deps.store.findPortalSession(hashSecret(sessionId), deps.clock.now());
  if (session === undefined) return undefined;
  const user = await deps.store.findUserById(session.userId);
  if (user === undefined || user.disabled) return undefined;
  const account = await deps.store.findPortalAccount(user.id);
  if (account !== undefined && account.state !== "active") return undefined;
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
    if (!isActive(found)) return;
    const code = generateCode();
    const now = deps.clock.now();
    await deps.store.replacePortalCode(found.user.id, {
      now,
      code: { purpose: "reset", codeHash: hashCode(email, code), expiresAt: now + RESET_CODE_MS },
      mail: toResetMail(client.links, email, code),
      audit: entry(deps, anonymous(client), "portal.reset_requested", toUserRef(email)),
    });
  };
  if (deps.defer === undefined) await queueCode();
  else deps.defer(queueCode);
}

/**
 * Sets a new password with a reset code: every token of the user ends (the revoke-all
 * cutoff), every portal session too, and a notice is mailed. Resolves to how many live tokens
 * ended.
 * @throws {AuthError} `invalid_request` for the password or a wrong, used or expired code.
 */
export async function resetPassword(
  deps: PortalAccountDeps,
  client: PortalClient,
  input: { email: string; code: unknown; password: unknown },
): Promise<number> {
  const email = normalizeEmail(String(input.email ?? "")).slice(0, 254);
  const password = toPortalPassword(input.password, email);
  const { user, codeId } = await checkCode(deps, client, input, "reset");
  const passwordHash = await deps.hasher.hash(password);
  try {
    return await deps.store.usePortalCode(codeId, {
      now: deps.clock.now(),
      passwordHash,
      mail: toPasswordChangedMail(client.links, email),
      audit: (ended: number) =>
        entry(deps, anonymous(client), "portal.password_reset", toUserRef(email), {
          user_id: user.id,
          tokens_revoked: ended,
        }),
    });
  } catch (error) {
    if (error instanceof StoreConflict) throw invalidCode();
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
  const account = await deps.store.findPortalAccount(user.id);
  if (account === undefined) {
    throw new AuthError("not_found", `No portal account for "${user.email}"`);
  }
  if (account.state !== "pending_approval") {
    throw new AuthError(
      "conflict",
      `Cannot approve ${user.email}: the account is ${account.state.replace("_", " ")}`,
    );
  }
  await deps.store.updatePortalState(user.id, {
    now: deps.clock.now(),
    state: "active",
    mail: toApprovedMail(links, user.email),
    audit: entry(deps, deps.actor, "portal.approved", toUserRef(user.email)),
  });
}
