/**
 * API keys: creating, rotating (a successor, and the old key's grace),
 * suspending, resuming and revoking. Each change is one atomic, audited
 * store call. The key itself is returned once, at creation; only its digest
 * is stored.
 *
 * @module
 */
import type { ApiKey, Store, User } from "../store/store.ts";
import { MAX_ROTATION_CHAIN } from "../store/store_limits.ts";
import { findUnsafeCharacter } from "./account_rules.ts";
import { toKeyRef } from "./audit.ts";
import { type ChangeDeps, observeAudit, toAuditEntry } from "./changes.ts";
import { generateApiKey, hashSecret, toKeyPrefix } from "./credentials.ts";
import { AuthError } from "./errors.ts";
import { StoreConflict } from "../store/errors.ts";
import { toKeyStatus } from "./key_status.ts";

/** Longest label of a key. */
export const MAX_KEY_LABEL_LENGTH = 200;

/** How long a rotated key keeps working when no grace is given. */
export const DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600;

function toIsoOrNull(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** What {@link createKey} needs. */
export interface NewKeyOptions {
  label?: string;
  /** Lifetime from now, in seconds; `undefined` for none. */
  expiresInSeconds?: number;
  /** A resource-server key that may introspect tokens. */
  introspect?: boolean;
  /**
   * Refuse (`conflict`) when the user holds this many keys that are not revoked, checked in
   * the insert's transaction (a portal user's own cap).
   */
  maxLiveKeys?: number;
}

/** A key just made, and the key itself (shown once). */
export interface CreatedKey {
  key: ApiKey;
  apiKey: string;
}

/**
 * A key's label, checked: at most {@link MAX_KEY_LABEL_LENGTH} characters, none of them a
 * control, invisible or bidirectional character.
 * @throws {AuthError} `invalid_request` saying which rule failed.
 */
export function toKeyLabel(label: string): string {
  if (label.length > MAX_KEY_LABEL_LENGTH) {
    throw new AuthError(
      "invalid_request",
      `Label too long: at most ${MAX_KEY_LABEL_LENGTH} characters`,
    );
  }
  const unsafe = findUnsafeCharacter(label);
  if (unsafe !== undefined) {
    throw new AuthError(
      "invalid_request",
      `Invalid label: control, invisible and bidirectional characters are not allowed (found ${unsafe})`,
    );
  }
  return label;
}

/**
 * Creates a key for a user. @throws {AuthError} `invalid_request` for a label
 * too long or holding a control character, `conflict` at `maxLiveKeys`, `not_found` when the
 * user was deleted meanwhile.
 */
export async function createKey(
  deps: ChangeDeps,
  user: User,
  options: NewKeyOptions = {},
): Promise<CreatedKey> {
  const label = toKeyLabel(options.label ?? "");
  const now = deps.clock.now();
  const expiresAt = options.expiresInSeconds === undefined
    ? null
    : now + options.expiresInSeconds * 1000;
  const apiKey = generateApiKey();
  const change = observeAudit(
    deps,
    (created: ApiKey) =>
      toAuditEntry(deps, "key.created", toKeyRef(created.id), {
        user: user.email,
        label,
        expires_at: toIsoOrNull(expiresAt),
        introspect: created.introspect ? 1 : 0,
      }),
  );
  let key: ApiKey;
  try {
    key = await deps.store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret(apiKey),
      prefix: toKeyPrefix(apiKey),
      label,
      expiresAt,
      introspect: options.introspect === true,
    }, { now, audit: change.audit, maxLiveKeys: options.maxLiveKeys });
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    // Deletion is final: a user gone now was gone (or going) when the insert was refused.
    if (await deps.store.findUserById(user.id) === undefined) {
      throw new AuthError("not_found", `No user ${user.id}`);
    }
    if (options.maxLiveKeys === undefined) throw error;
    throw new AuthError("conflict", `At most ${options.maxLiveKeys} keys: revoke one first`);
  }
  change.notify();
  return { key, apiKey };
}

/** A rotation's outcome: the successor (shown once) and until when the old key works. */
export interface RotatedKey extends CreatedKey {
  oldKeyUntil: number;
}

/**
 * How many rotations back from `key` the oldest key that may still work (not revoked, not
 * expired: a disabled one may be enabled) was rotated: 0 when none does. A key's limits are its
 * chain's last key's, found by walking the chain forward on every lease, so a rotation that would
 * put a working key more than `MAX_ROTATION_CHAIN` rotations behind is refused.
 */
async function countRotationsBehind(
  store: Pick<Store, "listApiKeys">,
  key: Pick<ApiKey, "id" | "userId">,
  now: number,
): Promise<number> {
  const keys = await store.listApiKeys(key.userId);
  const predecessorOf = new Map(
    keys.filter((k) => k.replacedBy !== null).map((k) => [k.replacedBy!, k]),
  );
  let behind = 0;
  let current = predecessorOf.get(key.id);
  for (let depth = 1; current !== undefined && depth <= keys.length; depth++) {
    if (current.revokedAt === null && (current.expiresAt === null || current.expiresAt > now)) {
      behind = depth;
    }
    current = predecessorOf.get(current.id);
  }
  return behind;
}

/**
 * Issues a successor with the same owner, label, kind and lifetime (counted
 * from now); the old key and its tokens stop after `graceSeconds`.
 *
 * @throws {AuthError} `conflict` unless the old key is active and not yet
 * rotated (also when that changes meanwhile), or when a key rotated `MAX_ROTATION_CHAIN`
 * rotations before it still works; `not_found` when it was deleted meanwhile (with its user).
 */
export async function rotateKey(
  deps: ChangeDeps,
  old: ApiKey,
  graceSeconds = DEFAULT_ROTATION_GRACE_SECONDS,
): Promise<RotatedKey> {
  const now = deps.clock.now();
  const status = toKeyStatus(old, now);
  if (status !== "active") {
    throw new AuthError("conflict", `Cannot rotate API key ${old.id}: it is ${status}`);
  }
  if (old.replacedBy !== null) {
    throw new AuthError(
      "conflict",
      `Cannot rotate API key ${old.id}: it was already rotated to key ${old.replacedBy}`,
    );
  }
  const behind = await countRotationsBehind(deps.store, old, now);
  if (behind >= MAX_ROTATION_CHAIN) {
    throw new AuthError(
      "conflict",
      `Cannot rotate API key ${old.id}: a key ${behind} rotations before it still works; ` +
        "rotate it once that key's grace period ends, or revoke that key",
    );
  }
  const oldKeyUntil = Math.min(old.expiresAt ?? Infinity, now + graceSeconds * 1000);
  // The successor keeps the old key's lifetime, counted from now.
  const expiresAt = old.expiresAt === null ? null : now + (old.expiresAt - old.createdAt);
  const email = (await deps.store.findUserById(old.userId))?.email ?? "";
  const apiKey = generateApiKey();
  const change = observeAudit(deps, (successor: ApiKey) => [
    toAuditEntry(deps, "key.rotated", toKeyRef(old.id), {
      successor: successor.id,
      old_key_until: new Date(oldKeyUntil).toISOString(),
    }),
    toAuditEntry(deps, "key.created", toKeyRef(successor.id), {
      user: email,
      label: old.label,
      expires_at: toIsoOrNull(expiresAt),
      rotated_from: old.id,
    }),
  ]);
  let key: ApiKey;
  try {
    key = await deps.store.rotateApiKey(old.id, {
      successor: {
        userId: old.userId,
        keyHash: hashSecret(apiKey),
        prefix: toKeyPrefix(apiKey),
        label: old.label,
        expiresAt,
        introspect: old.introspect,
      },
      oldKeyExpiresAt: oldKeyUntil,
      now,
      audit: change.audit,
    });
  } catch (error) {
    if (!(error instanceof StoreConflict)) throw error;
    if (await deps.store.findApiKeyById(old.id) === undefined) {
      throw new AuthError("not_found", `No API key ${old.id}`);
    }
    throw new AuthError(
      "conflict",
      `Cannot rotate API key ${old.id}: it was rotated or revoked meanwhile`,
    );
  }
  change.notify();
  return { key, apiKey, oldKeyUntil };
}

/**
 * Suspends or resumes a key that is not revoked; resolves to whether its
 * state changed (audited only then).
 *
 * @throws {AuthError} `conflict` for a revoked key.
 */
export async function setKeyDisabled(
  deps: ChangeDeps,
  key: ApiKey,
  disabled: boolean,
): Promise<boolean> {
  if (key.revokedAt !== null) throw new AuthError("conflict", `API key ${key.id} is revoked`);
  const alreadyThere = (key.disabledAt !== null) === disabled;
  const change = observeAudit(
    deps,
    (done: boolean) =>
      done && !alreadyThere
        ? toAuditEntry(deps, disabled ? "key.disabled" : "key.enabled", toKeyRef(key.id))
        : undefined,
  );
  const done = await deps.store.updateApiKeyDisabled(key.id, {
    disabled,
    now: deps.clock.now(),
    audit: change.audit,
  });
  change.notify();
  return done && !alreadyThere;
}

/**
 * Revokes a key and the live tokens issued with it; resolves to how many
 * tokens, or `undefined` when the key was already revoked (nothing changes).
 */
export async function revokeKey(deps: ChangeDeps, key: ApiKey): Promise<number | undefined> {
  if (key.revokedAt !== null) return undefined;
  const change = observeAudit(
    deps,
    (n: number) => toAuditEntry(deps, "key.revoked", toKeyRef(key.id), { tokens_revoked: n }),
  );
  const revoked = await deps.store.revokeApiKey(key.id, {
    now: deps.clock.now(),
    audit: change.audit,
  });
  change.notify();
  return revoked;
}
