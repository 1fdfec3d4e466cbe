/**
 * The lifecycle state of an API key at a given time: one rule shared by the
 * token endpoint, the non-secure API-key check and the admin listings. (The
 * secure path applies the same rule inside its one SQL statement.)
 *
 * @module
 */
import type { ApiKey } from "./store.ts";

/** What an API key is at a given instant. Only `active` keys authenticate. */
export type KeyStatus = "active" | "disabled" | "expired" | "revoked";

/** The key's status at `now`: revoked, then disabled, then expired, else active. */
export function toKeyStatus(
  key: Pick<ApiKey, "revokedAt" | "disabledAt" | "expiresAt">,
  now: number,
): KeyStatus {
  if (key.revokedAt !== null) return "revoked";
  if (key.disabledAt !== null) return "disabled";
  if (key.expiresAt !== null && key.expiresAt <= now) return "expired";
  return "active";
}

/** Whether the key may authenticate a request at `now`. */
export function isKeyUsable(
  key: Pick<ApiKey, "revokedAt" | "disabledAt" | "expiresAt">,
  now: number,
): boolean {
  return toKeyStatus(key, now) === "active";
}
