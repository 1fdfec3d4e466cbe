/**
 * The developer portal's part of the store contract (`PortalStore`, part of `Store` in
 * store.ts) and its row types: portal accounts and their states, one-time codes (stored as
 * digests, with an expiry and an attempt count), portal sessions (stored as digests) and the
 * mail outbox, which every change that mails is written with, in its own transaction.
 *
 * @module
 */
import type {
  AuditAnonymizing,
  AuditedChange,
  DeletedUser,
  NamingUser,
  NewUser,
  User,
} from "./store_types.ts";

/** Where a portal account stands: only `active` accounts may sign in or hold keys. */
export type PortalAccountState = "pending_verification" | "pending_approval" | "active";

/** What a one-time code is for. */
export type PortalCodePurpose = "verify" | "reset" | "email";

/** A user's portal account row (users an operator added have none). */
export interface PortalAccount {
  userId: number;
  state: PortalAccountState;
  createdAt: number;
  /**
   * Whether the user row is disabled only because the account is not active yet: activation
   * enables the user only then. An operator's disable or enable (`updateUserDisabled`) ends the
   * hold, so activation never clears an operator's disable.
   */
  userHeld: boolean;
}

/** A one-time code to store: its digest only. */
export interface NewPortalCode {
  purpose: PortalCodePurpose;
  /** SHA-256 of the code, bound to its user (see src/auth/portal/codes.ts). */
  codeHash: Uint8Array;
  expiresAt: number;
  /** Purpose `email` only: the address the code was mailed to, which it makes the user's. */
  newEmail?: string;
  /**
   * Purpose `verify`: the password hash of the sign-up that made the code; spending the code
   * makes it the user's (a later sign-up adds a code of its own and replaces nothing).
   */
  passwordHash?: string;
  /**
   * Purpose `verify`: the client network of the sign-up that made the code (an IPv4 address's
   * /24, an IPv6 one's /64), so that one network's sign-ups end only that network's candidates.
   */
  network?: string;
}

/** A stored one-time code. */
export interface PortalCode extends NewPortalCode {
  id: number;
  userId: number;
  createdAt: number;
  /** Wrong codes tried against it; the domain refuses it past its limit. */
  attempts: number;
  usedAt: number | null;
}

/** A user with its portal account ({@link PortalStore.listPortalUsers}). */
export interface PortalUser {
  user: User;
  account: PortalAccount;
}

/** A live session with its user, and the user's portal account if it has one. */
export interface PortalSessionUser {
  session: PortalSession;
  user: User;
  /** `undefined` for an operator's user the portal has no account of. */
  account?: PortalAccount;
}

/** A user {@link PortalStore.deleteUnverifiedPortalUsers} deleted. */
export interface DeletedPortalUser extends DeletedUser {
  userId: number;
  /** The opaque name its audit rows took (`AuditAnonymizing.anonymousRef`). */
  anonymousRef: string;
}

/** A message to queue in the outbox. */
export interface NewMail {
  recipient: string;
  subject: string;
  /** Plain-text body; cleared once the message is sent or given up. */
  text: string;
}

/** A queued message the mailer claimed, with its id (its Message-ID is derived from it). */
export interface OutboxMail extends NewMail {
  id: number;
  createdAt: number;
  /** Sends tried so far, this one included. */
  attempts: number;
}

/** A portal session, found by its id's digest. */
export interface PortalSession {
  userId: number;
  createdAt: number;
  expiresAt: number;
}

/** What a spent code changes, beside marking it used (see {@link PortalStore.usePortalCode}). */
export interface CodeUse {
  /** The account's new state; `active` also enables a user the portal holds (`userHeld`). */
  state?: PortalAccountState;
  /** A new password hash: moves the user's cutoff (every token ends) and ends portal sessions. */
  passwordHash?: string;
  /** A message queued in the same transaction. */
  mail?: NewMail;
  /**
   * Purpose `email`: the code's `newEmail` becomes the user's e-mail (a grant change: grants
   * carry the e-mail). @throws {StoreConflict} when another user has it by now.
   */
  changeEmail?: boolean;
}

/** The outbox's state, for metrics. */
export interface MailCounts {
  /** Queued, neither sent nor given up. */
  pending: number;
  sent: number;
  /** Messages given up after their last failed attempt. */
  givenUp: number;
  /** Failed send attempts over every message the outbox holds. */
  failedAttempts: number;
}

/** The portal's accounts, codes, sessions and outbox. Part of `Store`. */
export interface PortalStore {
  findPortalAccount(userId: number): Promise<PortalAccount | undefined>;
  /**
   * The users whose portal account is in `state`, with it, the oldest account first (then by
   * user id): one query over the accounts' index by state, not a scan of the users.
   */
  listPortalUsers(state: PortalAccountState): Promise<PortalUser[]>;
  /**
   * Adds a user (disabled until its account is `active`) with its portal account, its
   * first code and its mail, in one transaction.
   * @throws {StoreConflict} when the e-mail is taken (nothing written).
   */
  insertPortalUser(
    user: NewUser,
    change: AuditedChange<User> & {
      state: PortalAccountState;
      code?: NewPortalCode;
      mail: NewMail;
    },
  ): Promise<User>;
  /**
   * Ends the user's unused codes of the same purpose, stores `code` and queues `mail`, in one
   * transaction; with `passwordHash` (a sign-up repeated while unverified), replaces the hash.
   * For a disabled user (an unverified sign-up is one) that is no grant change: no grant epoch
   * bump and no durability wait, the same commit as a first sign-up's `insertPortalUser`, so
   * that the two answers take the same time.
   * @throws {StoreConflict} when the user is gone (deleted meanwhile): nothing written.
   */
  replacePortalCode(
    userId: number,
    change: AuditedChange<void> & { code: NewPortalCode; mail: NewMail; passwordHash?: string },
  ): Promise<void>;
  /**
   * Adds `code` beside the user's live codes of its purpose (a sign-up repeated while
   * unverified: one candidate more), and queues `mail`, in one transaction. First, with
   * `keepPerNetwork` and a `code.network`, the oldest codes of that network end so that at most
   * `keepPerNetwork` of it stay live; then the oldest of any network, so that at most `keep`
   * stay live.
   * @throws {StoreConflict} when the user is gone (deleted meanwhile): nothing written.
   */
  addPortalCode(
    userId: number,
    change: AuditedChange<void> & {
      code: NewPortalCode;
      mail: NewMail;
      keep: number;
      keepPerNetwork?: number;
    },
  ): Promise<void>;
  /**
   * Enrols a user an operator added: gives it an `active` portal account (not held), so that
   * it may sign in and reset its password through the portal.
   * @throws {StoreConflict} when the user has a portal account already, or is gone (nothing
   * written).
   */
  insertPortalAccount(userId: number, change: AuditedChange<void>): Promise<void>;
  /**
   * Queues a message on its own (a notice), with its audit entries.
   * @throws {StoreConflict} when `change.ofUser` is gone (nothing written).
   */
  insertMail(mail: NewMail, change: AuditedChange<void> & NamingUser): Promise<void>;
  /** The user's newest code of `purpose` that is unused and unexpired at `now`. */
  findPortalCode(
    userId: number,
    purpose: PortalCodePurpose,
    now: number,
  ): Promise<PortalCode | undefined>;
  /** Every unused and unexpired code of `purpose` at `now`, the newest first. */
  findPortalCodes(userId: number, purpose: PortalCodePurpose, now: number): Promise<PortalCode[]>;
  /**
   * Counts a wrong code against a code (or each of several); resolves to the (first) code's
   * attempts now.
   * @throws {StoreConflict} when `change.ofUser` is gone (nothing written).
   */
  recordPortalCodeAttempt(
    codeId: number | readonly number[],
    change: AuditedChange<number> & NamingUser,
  ): Promise<number>;
  /**
   * Spends a code and makes its change ({@link CodeUse}) in one transaction (a code with a
   * `passwordHash` also makes it the user's); resolves to how many live tokens a new password
   * ended.
   * @throws {StoreConflict} when the code was used meanwhile (nothing written).
   */
  usePortalCode(codeId: number, change: AuditedChange<number> & CodeUse): Promise<number>;
  /**
   * Sets an account's state (an operator's approval); `active` also enables a user the portal
   * holds (`userHeld`), never one an operator disabled. With `from`, only while the account is
   * in that state, checked in the same transaction (an approval must not mail or audit an
   * account refused meanwhile).
   * @throws {StoreConflict} with `from`, when the account is not in it (or gone), and when the
   * user is gone: nothing written.
   */
  updatePortalState(
    userId: number,
    change: AuditedChange<void> & {
      state: PortalAccountState;
      mail?: NewMail;
      from?: PortalAccountState;
    },
  ): Promise<void>;
  /**
   * Stores a session by its id's digest; deletes the expired ones at `now`.
   * @throws {StoreConflict} when the user is gone (deleted meanwhile): nothing written.
   */
  insertPortalSession(
    idHash: Uint8Array,
    change: AuditedChange<void> & { userId: number; expiresAt: number },
  ): Promise<void>;
  /**
   * A signed-in request's one read: the live session by its digest, its user and the user's
   * portal account, in one query; `undefined` when the session is unknown or expired at `now`.
   */
  findPortalSessionUser(idHash: Uint8Array, now: number): Promise<PortalSessionUser | undefined>;
  /** Ends one session (sign-out); resolves to whether it existed. */
  deletePortalSession(idHash: Uint8Array, change: AuditedChange<boolean>): Promise<boolean>;
  /**
   * Claims up to `limit` queued messages due at `now` for sending: counts the attempt and
   * holds each until `now + leaseMs` (another sender, or this one after a crash, then retries).
   */
  claimMail(now: number, options: { limit: number; leaseMs: number }): Promise<OutboxMail[]>;
  /** Marks a message sent and clears its body. */
  markMailSent(id: number, now: number): Promise<void>;
  /**
   * A send failed: retry at `nextAttemptAt`, or never (`null`: given up, and the body, which
   * may hold a code, is cleared as once sent); `error` is kept for operators (without
   * credentials).
   */
  markMailFailed(
    id: number,
    failure: { now: number; nextAttemptAt: number | null; error: string },
  ): Promise<void>;
  /** The outbox's counts (for metrics). */
  countMail(): Promise<MailCounts>;
  /**
   * A signed-in user's new password: replaces the hash, moves the cutoff (every token ends),
   * ends the user's portal sessions but `keepSession`, and queues `mail`, in one transaction;
   * resolves to how many live tokens ended.
   * @throws {StoreConflict} when the user is gone (deleted meanwhile): nothing written.
   */
  updatePortalPassword(
    userId: number,
    change: AuditedChange<number> & {
      passwordHash: string;
      mail: NewMail;
      keepSession?: Uint8Array;
    },
  ): Promise<number>;
  /**
   * Sets a key's label (a portal user's own key); keeps grants.
   * @throws {StoreConflict} when the key is gone (deleted meanwhile): nothing written.
   */
  updateApiKeyLabel(keyId: number, change: AuditedChange<void> & { label: string }): Promise<void>;
  /**
   * Deletes up to `limit` users whose portal account is still `pending_verification` and was
   * created before `before` (sign-ups never verified), each as `deleteUser` deletes one (its
   * keys, tokens, counters, portal rows, and its audit rows made anonymous with what
   * `anonymize` gives for its id), in one transaction; resolves to what went, per user.
   */
  deleteUnverifiedPortalUsers(
    before: number,
    change: AuditedChange<DeletedPortalUser[]> & {
      limit: number;
      anonymize: (userId: number) => AuditAnonymizing;
    },
  ): Promise<DeletedPortalUser[]>;
}
