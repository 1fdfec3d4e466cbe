/**
 * Users: adding one, its token lifetime, its password, disabling and
 * enabling it, and revoking all its tokens. Each change is one atomic,
 * audited store call; changes that can end tokens report how many. These are
 * the use cases the admin CLI and the admin API both call: they take the
 * plaintext password and the hasher, canonicalise the e-mail, check, hash,
 * write and audit.
 *
 * @module
 */
import type { PasswordHasher } from "../passwords/passwords.ts";
import { formatDuration } from "../platform/duration.ts";
import type { DeletedUser, Store, TokenRow, User } from "../store/store.ts";
import { StoreConflict } from "../store/errors.ts";
import {
  findUnsafeCharacter,
  isAccountEmail,
  isPasswordSized,
  MAX_EMAIL_LENGTH,
  MAX_PASSWORD_BYTES,
  normalizeEmail,
} from "./account_rules.ts";
import { toUserRef } from "./audit.ts";
import { type ChangeDeps, observeAudit, toAuditEntry } from "./changes.ts";
import { AuthError } from "./errors.ts";
import { toAnonymizing } from "./user_anonymity.ts";

/** A user's token lifetime as the audit log and listings show it. */
export function describeTimeout(user: Pick<User, "tokenTimeoutSeconds">): string {
  return user.tokenTimeoutSeconds === null ? "default" : formatDuration(user.tokenTimeoutSeconds);
}

/**
 * The e-mail address of a new account, normalised.
 *
 * @throws {AuthError} `invalid_request` unless it is an address (see account_rules.ts).
 */
export function toAccountEmail(text: string): string {
  const email = normalizeEmail(text);
  const unsafe = findUnsafeCharacter(email);
  if (unsafe !== undefined) {
    throw new AuthError(
      "invalid_request",
      `Invalid e-mail "${
        text.slice(0, 64)
      }": control, invisible and bidirectional characters are not allowed (found ${unsafe})`,
    );
  }
  if (!isAccountEmail(email)) {
    throw new AuthError(
      "invalid_request",
      `Invalid e-mail "${
        text.slice(0, 64)
      }": expected an address of 3 to ${MAX_EMAIL_LENGTH} characters`,
    );
  }
  return email;
}

/** The user with this e-mail (any letter case). @throws {AuthError} `not_found`. */
export async function findUserOrFail(store: Store, email: string): Promise<User> {
  const user = await store.findUserByEmail(normalizeEmail(email));
  if (user === undefined) throw new AuthError("not_found", `No user "${email.slice(0, 254)}"`);
  return user;
}

/**
 * The user with this (canonical) e-mail, also when its row was written
 * before e-mails were stored in NFC: such rows are compared in NFC too.
 */
export async function findUserInAnyForm(store: Store, email: string): Promise<User | undefined> {
  return await store.findUserByEmail(email) ??
    (await store.listUsers()).find((user) => normalizeEmail(user.email) === email);
}

/** Why a new account with `email` cannot be added: `existing` has it. */
export function describeExisting(email: string, existing: User): string {
  return `User "${email}" already exists` +
    (existing.email === email ? "" : ` (as "${existing.email}", the same address in NFC)`);
}

/** What a change that hashes a password needs: {@link ChangeDeps} and the hasher. */
export interface AccountDeps extends ChangeDeps {
  hasher: Pick<PasswordHasher, "hash">;
}

/** What {@link addUser} needs: the password in plain text (only its hash is stored). */
export interface NewAccount {
  email: string;
  password: string;
  tokenTimeoutSeconds: number | null;
}

/**
 * A password a user may be given.
 *
 * @throws {AuthError} `invalid_request` unless it is 1 to {@link MAX_PASSWORD_BYTES} bytes.
 */
export function toAccountPassword(password: string): string {
  if (!isPasswordSized(password)) {
    throw new AuthError(
      "invalid_request",
      `Invalid password: expected 1 to ${MAX_PASSWORD_BYTES} bytes`,
    );
  }
  return password;
}

/**
 * Adds a user: canonicalises the e-mail, refuses a taken one (in any Unicode normal form)
 * before any hashing, hashes the password and stores the user with its audit entry.
 *
 * @throws {AuthError} `invalid_request` for the e-mail or password, `conflict` when taken.
 */
export async function addUser(deps: AccountDeps, account: NewAccount): Promise<User> {
  const email = toAccountEmail(account.email);
  const password = toAccountPassword(account.password);
  const existing = await findUserInAnyForm(deps.store, email);
  if (existing) throw new AuthError("conflict", describeExisting(email, existing));
  const passwordHash = await deps.hasher.hash(password);
  const change = observeAudit(
    deps,
    (added: User) =>
      toAuditEntry(deps, "user.added", toUserRef(added.email), {
        timeout: describeTimeout(added),
      }),
  );
  let user: User;
  try {
    user = await deps.store.insertUser(
      { email, passwordHash, tokenTimeoutSeconds: account.tokenTimeoutSeconds },
      { now: deps.clock.now(), audit: change.audit },
    );
  } catch (error) {
    // Added by someone else while the password was hashed.
    if (!(error instanceof StoreConflict)) throw error;
    throw new AuthError("conflict", `User "${email}" already exists`);
  }
  change.notify();
  return user;
}

/** Sets a user's own token lifetime (`null`: the server's default). */
export async function changeUserTimeout(
  deps: ChangeDeps,
  user: User,
  tokenTimeoutSeconds: number | null,
): Promise<void> {
  const change = observeAudit(
    deps,
    () =>
      toAuditEntry(deps, "user.timeout_changed", toUserRef(user.email), {
        timeout: tokenTimeoutSeconds === null ? "default" : formatDuration(tokenTimeoutSeconds),
      }),
  );
  await deps.store.updateUserTimeout(user.id, {
    tokenTimeoutSeconds,
    now: deps.clock.now(),
    audit: change.audit,
  });
  change.notify();
}

/**
 * Replaces a user's password (hashed here), ending every token; resolves to how many live ones.
 *
 * @throws {AuthError} `invalid_request` for a password out of bounds.
 */
export async function changeUserPassword(
  deps: AccountDeps,
  user: User,
  password: string,
  options: { keepPortalSession?: Uint8Array } = {},
): Promise<number> {
  const passwordHash = await deps.hasher.hash(toAccountPassword(password));
  const change = observeAudit(
    deps,
    (n: number) =>
      toAuditEntry(deps, "user.password_changed", toUserRef(user.email), { tokens_revoked: n }),
  );
  const revoked = await deps.store.updateUserPassword(user.id, {
    passwordHash,
    now: deps.clock.now(),
    audit: change.audit,
    keepPortalSession: options.keepPortalSession,
  });
  change.notify();
  return revoked;
}

/** Disables (ending every token; resolves to how many live ones) or enables a user. */
export async function setUserDisabled(
  deps: ChangeDeps,
  user: User,
  disabled: boolean,
): Promise<number> {
  const change = observeAudit(
    deps,
    (n: number) =>
      disabled
        ? toAuditEntry(deps, "user.disabled", toUserRef(user.email), { tokens_revoked: n })
        : toAuditEntry(deps, "user.enabled", toUserRef(user.email)),
  );
  const revoked = await deps.store.updateUserDisabled(user.id, {
    disabled,
    now: deps.clock.now(),
    audit: change.audit,
  });
  change.notify();
  return revoked;
}

/**
 * Invalidates every token of a user issued before `before` (default: up to
 * and including now); resolves to how many live tokens ended.
 *
 * @throws {AuthError} `invalid_request` for a `before` in the future.
 */
export async function revokeUserTokens(
  deps: ChangeDeps,
  user: User,
  before?: number,
): Promise<number> {
  const now = deps.clock.now();
  if (before !== undefined && before > now) {
    throw new AuthError("invalid_request", "Cannot revoke tokens before a time in the future");
  }
  const change = observeAudit(
    deps,
    (n: number) =>
      toAuditEntry(deps, "tokens.revoked", toUserRef(user.email), {
        before: new Date(before ?? now).toISOString(),
        tokens_revoked: n,
      }),
  );
  const revoked = await deps.store.revokeTokensOfUser(user.id, {
    before,
    now,
    audit: change.audit,
  });
  change.notify();
  return revoked;
}

/**
 * Changes a user's e-mail; keys, tokens and timeout stay with the user.
 *
 * @throws {AuthError} `invalid_request` for the e-mail, `conflict` when another user has it
 * (in any Unicode normal form).
 */
export async function renameUser(deps: ChangeDeps, user: User, newEmail: string): Promise<string> {
  const email = toAccountEmail(newEmail);
  const existing = await findUserInAnyForm(deps.store, email);
  if (existing !== undefined && existing.id !== user.id) {
    throw new AuthError(
      "conflict",
      `Cannot rename ${user.email}: user "${email}" already exists` +
        (existing.email === email ? "" : ` (as "${existing.email}", the same address in NFC)`),
    );
  }
  if (email === user.email) return email;
  const change = observeAudit(
    deps,
    () => toAuditEntry(deps, "user.renamed", toUserRef(email), { from: user.email }),
  );
  try {
    await deps.store.updateUserEmail(user.id, {
      email,
      now: deps.clock.now(),
      audit: change.audit,
    });
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    throw new AuthError("conflict", `Cannot rename ${user.email}: user "${email}" already exists`);
  }
  change.notify();
  return email;
}

/**
 * Deletes a user with their API keys, tokens and failed-login counters, in one audited change.
 * The audit log keeps the user's history under an opaque id (`user:deleted:…`, the entry's
 * subject, with the numeric user id in its detail): in the same transaction the user's earlier
 * entries take it instead of the e-mail, as every deletion of a user does (user_anonymity.ts).
 */
export async function deleteUser(deps: ChangeDeps, user: User): Promise<DeletedUser> {
  const anonymizing = toAnonymizing(user.id);
  const change = observeAudit(
    deps,
    (deleted: DeletedUser) =>
      toAuditEntry(deps, "user.deleted", anonymizing.anonymousRef, {
        user_id: user.id,
        api_keys_deleted: deleted.apiKeys,
        tokens_deleted: deleted.tokens,
        audit_rows_anonymized: deleted.auditRows,
      }),
  );
  const deleted = await deps.store.deleteUser(user.id, {
    now: deps.clock.now(),
    audit: change.audit,
    ...anonymizing,
  });
  change.notify();
  return deleted;
}

/** Where a token stands at a time, for listings. */
export type TokenState = "live" | "expired" | "revoked" | "user disabled";

/**
 * A user's tokens with their state at `now`, newest first: revoked (itself, or
 * issued before the user's cutoff), expired, or ended with the user's being
 * disabled; otherwise live (its key's state is the key listing's business).
 */
export async function listUserTokens(
  store: Store,
  user: User,
  now: number,
): Promise<(TokenRow & { state: TokenState })[]> {
  return (await store.listTokensOfUser(user.id)).map((token) => ({
    ...token,
    state: token.revokedAt !== null || token.issuedAt < user.tokensValidFrom
      ? "revoked"
      : token.expiresAt <= now
      ? "expired"
      : user.disabled
      ? "user disabled"
      : "live",
  }));
}
