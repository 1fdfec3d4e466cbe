/**
 * What a signed-in portal user does with their own API keys and tokens (the account itself:
 * own_account.ts): thin checks of ownership over the use cases every edge calls (../keys.ts,
 * ../users.ts), audited with the actor `portal:user:<id>`. A key is returned once, when made;
 * it is never mailed.
 *
 * @module
 */
import type { ApiKeyListing, User } from "../../store/store.ts";
import { StoreConflict } from "../../store/errors.ts";
import { type ChangeDeps } from "../changes.ts";
import { AuthError } from "../errors.ts";
import {
  type CreatedKey,
  createKey,
  revokeKey,
  type RotatedKey,
  rotateKey,
  toKeyLabel,
} from "../keys.ts";
import { toKeyRef } from "../audit.ts";
import { toKeyStatus } from "../key_status.ts";
import { listUserTokens, type TokenState } from "../users.ts";

/** Keys a portal user may hold that are not revoked. */
export const MAX_OWN_KEYS = 20;
/** How long a rotated key keeps working beside its successor, unless the user says less. */
export const OWN_ROTATION_GRACE_SECONDS = 24 * 3600;

/** One of the user's keys as the portal shows it (never the key itself). */
export interface OwnKey {
  id: number;
  prefix: string;
  label: string;
  status: string;
  createdAt: number;
  expiresAt: number | null;
  lastUsedAt: number | null;
  replacedBy: number | null;
}

function toOwnKey(key: ApiKeyListing, now: number): OwnKey {
  return {
    id: key.id,
    prefix: key.prefix,
    label: key.label,
    status: toKeyStatus(key, now),
    createdAt: key.createdAt,
    expiresAt: key.expiresAt,
    lastUsedAt: key.lastUsedAt,
    replacedBy: key.replacedBy,
  };
}

/** The user's keys, revoked ones included, newest first. */
export async function listOwnKeys(deps: ChangeDeps, user: User): Promise<OwnKey[]> {
  const now = deps.clock.now();
  return (await deps.store.listApiKeys(user.id)).filter((key) => !key.introspect)
    .map((key) => toOwnKey(key, now)).sort((a, b) => b.id - a.id);
}

/** @throws {AuthError} `not_found` unless the key is the user's (another's is "not found" too). */
async function findOwnKey(deps: ChangeDeps, user: User, keyId: number) {
  const key = Number.isSafeInteger(keyId) && keyId > 0
    ? await deps.store.findApiKeyById(keyId)
    : undefined;
  if (key === undefined || key.userId !== user.id || key.introspect) {
    throw noOwnKey(keyId);
  }
  return key;
}

/**
 * Creates a key; the result holds the key itself, to be shown once. The cap is checked in the
 * insert's transaction, so concurrent creates never pass it.
 * @throws {AuthError} `conflict` past {@link MAX_OWN_KEYS}, `invalid_request` for the label.
 */
export async function createOwnKey(
  deps: ChangeDeps,
  user: User,
  label: string,
): Promise<CreatedKey> {
  return await createKey(deps, user, { label, maxLiveKeys: MAX_OWN_KEYS });
}

/** Rotates one of the user's keys: the old one works `graceSeconds` longer (at most a day). */
export async function rotateOwnKey(
  deps: ChangeDeps,
  user: User,
  keyId: number,
  graceSeconds = OWN_ROTATION_GRACE_SECONDS,
): Promise<RotatedKey> {
  const key = await findOwnKey(deps, user, keyId);
  const grace = Math.max(0, Math.min(OWN_ROTATION_GRACE_SECONDS, Math.floor(graceSeconds)));
  try {
    return await rotateKey(deps, key, grace);
  } catch (error) {
    // Deleted (with its user) since it was read.
    if (error instanceof AuthError && error.code === "not_found") throw noOwnKey(keyId);
    throw error;
  }
}

/**
 * Sets the label of one of the user's keys (the rules of a new key's label).
 * @throws {AuthError} `not_found`, `invalid_request` for the label.
 */
export async function labelOwnKey(
  deps: ChangeDeps,
  user: User,
  keyId: number,
  label: string,
): Promise<void> {
  const key = await findOwnKey(deps, user, keyId);
  const checked = toKeyLabel(label);
  try {
    await deps.store.updateApiKeyLabel(key.id, {
      now: deps.clock.now(),
      label: checked,
      audit: {
        at: deps.clock.now(),
        actor: deps.actor,
        action: "portal.key_labelled",
        subject: toKeyRef(key.id),
        detail: { label: checked },
      },
    });
  } catch (error) {
    // Deleted (with its user) since it was read.
    if (error instanceof StoreConflict) throw noOwnKey(keyId);
    throw error;
  }
}

/** Revokes one of the user's keys and its tokens; resolves to how many tokens ended. */
export async function revokeOwnKey(deps: ChangeDeps, user: User, keyId: number): Promise<number> {
  const key = await findOwnKey(deps, user, keyId);
  return await revokeKey(deps, key) ?? 0;
}

/** The user's tokens (never the tokens themselves), newest first. */
export async function listOwnTokens(
  deps: ChangeDeps,
  user: User,
): Promise<
  { id: number; apiKeyId: number; issuedAt: number; expiresAt: number; state: TokenState }[]
> {
  return (await listUserTokens(deps.store, user, deps.clock.now())).slice(0, 200).map((token) => ({
    id: token.id,
    apiKeyId: token.apiKeyId,
    issuedAt: token.issuedAt,
    expiresAt: token.expiresAt,
    state: token.state,
  }));
}

/** Revokes one of the user's tokens; resolves to whether it was live. */
export async function revokeOwnToken(
  deps: ChangeDeps,
  user: User,
  tokenId: number,
): Promise<boolean> {
  const token = Number.isSafeInteger(tokenId)
    ? (await deps.store.listTokensOfUser(user.id)).find((row) => row.id === tokenId)
    : undefined;
  if (token === undefined) {
    throw new AuthError("not_found", `No token ${String(tokenId).slice(0, 20)} of yours`);
  }
  return await deps.store.revokeToken(token.id, {
    now: deps.clock.now(),
    audit: (done: boolean) =>
      done
        ? {
          at: deps.clock.now(),
          actor: deps.actor,
          action: "token.revoked",
          subject: `token:${token.id}`,
          detail: { user: user.email },
        }
        : undefined,
  });
}

function noOwnKey(keyId: unknown): AuthError {
  return new AuthError("not_found", `No API key ${String(keyId).slice(0, 20)} of yours`);
}
