/**
 * What the portal's account use cases share: their dependencies, the request's facts, how
 * they name actors in the audit log, and how they find an e-mail's account and tell whether it
 * is usable. The use cases: sign-up, verification and approval (accounts.ts), sessions
 * (sessions.ts), password reset (password_reset.ts), a signed-in user's own account and keys
 * (own_account.ts, own_keys.ts).
 *
 * @module
 */
import type { PasswordHasher } from "../../passwords/passwords.ts";
import type { Clock } from "../../platform/clock.ts";
import type { AuditEntry, PortalAccount, Store, User } from "../../store/store.ts";
import type { AuditAction } from "../audit.ts";
import type { ChangeDeps } from "../changes.ts";
import { toHasherError } from "../login.ts";
import { isAllowedDomain } from "./mail_address.ts";
import type { MailLinks } from "./portal_mail.ts";
import type { PortalThrottle } from "./portal_throttle.ts";

/** Who may open an account (see `--portal-mode`). */
export type SignUpMode = "open" | "domains" | "approval" | "invite";

/** What the account use cases need. */
export interface PortalAccountDeps {
  store: Store;
  clock: Clock;
  hasher: Pick<PasswordHasher, "hash" | "verify" | "findRefusal">;
  throttle: PortalThrottle;
  mode: SignUpMode;
  /** `domains` mode: the domains that may sign up, and sign in. */
  domains?: readonly string[];
  /**
   * Whether users an operator added without a portal account may sign in and reset their
   * password through the portal (`--portal-existing-users`); default: not until enrolled.
   */
  existingUsers?: boolean;
  /** The key of the codes' digests (`--portal-secret-file`, required with the portal on). */
  codeKey: Uint8Array;
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
  /** Aborted when the client goes away: a slow password check stops. */
  signal?: AbortSignal;
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

/** The actor of a change made before sign-in: the client's address. */
export function toAnonymousActor(client: PortalClient): string {
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
 * The user with this e-mail and its portal account (`undefined` for an operator's user). The
 * same two reads whether or not the address has a user (no user: an id no row has), so that
 * sign-up and sign-in do the same work for known, pending and unknown addresses.
 */
export async function findAccount(
  store: Store,
  email: string,
): Promise<{ user: User; account?: PortalAccount } | undefined> {
  const user = await store.findUserByEmail(email);
  const account = await store.findPortalAccount(user?.id ?? 0);
  return user && { user, account };
}

/**
 * Whether a user may sign in to the portal and reset its password there: enabled; its account
 * active, or, without one (an operator's user), only with `existingUsers`; and in `domains`
 * mode, its address in an allowed domain.
 */
export function isActive(
  found: { user: User; account?: PortalAccount } | undefined,
  policy: Pick<PortalAccountDeps, "mode" | "domains" | "existingUsers">,
): found is { user: User; account?: PortalAccount } {
  if (found === undefined || found.user.disabled) return false;
  if (!isAllowedDomain(found.user.email, policy)) return false;
  return found.account === undefined
    ? policy.existingUsers === true
    : found.account.state === "active";
}

/**
 * A portal password check, with the pool's own errors as the domain's (`service_busy` with the
 * pool's Retry-After, `request_aborted`), as at the token endpoint; without `hash`, the same
 * work against a dummy hash. Callers first refuse while the pool is busy (`refuseIfBusy`).
 */
export async function verifyPortalPassword(
  hasher: Pick<PasswordHasher, "verify">,
  hash: string | undefined,
  password: string,
  signal?: AbortSignal,
): Promise<boolean> {
  try {
    return await hasher.verify(hash, password, signal);
  } catch (error) {
    throw toHasherError(error);
  }
}

/**
 * A new password's hash, with the pool's own errors as the domain's (as
 * {@link verifyPortalPassword}).
 */
export async function hashPortalPassword(
  hasher: Pick<PasswordHasher, "hash">,
  password: string,
): Promise<string> {
  try {
    return await hasher.hash(password);
  } catch (error) {
    throw toHasherError(error);
  }
}
