/**
 * The lifecycle state of an API key at a given time: one rule shared by the
 * token endpoint, the non-secure API-key check and the admin listings. (The
 * secure path applies the same rule inside its one SQL statement.)
 *
 * @module
 */
import type { ApiKey } from "../store/store.ts";

/**
 * What an API key is at a given instant. Only `active` keys authenticate;
 * `user_disabled` is a key that is fine itself but whose user is disabled.
 */
export type KeyStatus = "active" | "disabled" | "expired" | "revoked" | "user_disabled";

/** A key's own states, and its user's when known (listings join it). */
export type KeyState = Pick<ApiKey, "revokedAt" | "disabledAt" | "expiresAt"> & {
  /** Whether the key's user is disabled; unknown (taken as enabled) when absent. */
  userDisabled?: boolean;
};

/**
 * The key's status at `now`: revoked, then disabled, then expired, then
 * `user_disabled` (the key's own states first: they outlast the user's), else active.
 */
export function toKeyStatus(key: KeyState, now: number): KeyStatus {
  if (key.revokedAt !== null) return "revoked";
  if (key.disabledAt !== null) return "disabled";
  if (key.expiresAt !== null && key.expiresAt <= now) return "expired";
  if (key.userDisabled === true) return "user_disabled";
  return "active";
}

/** Whether the key may authenticate a request at `now`. */
export function isKeyUsable(key: KeyState, now: number): boolean {
  return toKeyStatus(key, now) === "active";
}
