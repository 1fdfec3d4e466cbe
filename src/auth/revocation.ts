/**
 * Token revocation by its holder, written once: the secure
 * `DELETE /api/secure/userservice/tokens/current` and RFC 7009's
 * `POST /api/userservice/tokens/revoke` both come here. Each revocation is
 * audited in its own transaction; revoking a token that is already revoked
 * (or unknown, or of another key) changes and records nothing.
 *
 * @module
 */
import type { Clock } from "../platform/clock.ts";
import type { AuditEntry, Store } from "../store/store.ts";
import { toKeyRef } from "./audit.ts";
import { hashSecret, isTokenShaped } from "./credentials.ts";

/** Who revokes: the holder of the API key the token was issued with. */
export interface Revoker {
  apiKeyId: number;
  /** The key's user, for the audit log. */
  email: string;
  clientAddress: string;
}

/** What {@link createRevocation} needs. */
export interface RevocationDeps {
  store: Pick<Store, "revokeToken" | "revokeTokenOfKey">;
  clock: Clock;
}

/** Revocation of single tokens by their holders. */
export interface Revocation {
  /** Revokes the token with this id (the caller's own); resolves to whether it was live. */
  revokeOwnToken(tokenId: number, by: Revoker): Promise<boolean>;
  /**
   * Revokes `token` if it was issued with the revoker's key (RFC 7009);
   * resolves to its id, or `undefined` when nothing changed.
   */
  revokeTokenOfKey(token: string, by: Revoker): Promise<number | undefined>;
}

export function createRevocation(deps: RevocationDeps): Revocation {
  const { store, clock } = deps;

  function toRevokedAudit(tokenId: number, by: Revoker): AuditEntry {
    return {
      at: clock.now(),
      actor: toKeyRef(by.apiKeyId),
      action: "token.revoked",
      subject: `token:${tokenId}`,
      detail: { user: by.email, client: by.clientAddress },
    };
  }

  return {
    revokeOwnToken(tokenId, by) {
      return store.revokeToken(tokenId, {
        now: clock.now(),
        audit: (revoked) => revoked ? toRevokedAudit(tokenId, by) : undefined,
      });
    },
    async revokeTokenOfKey(token, by) {
      if (!isTokenShaped(token)) return undefined;
      return await store.revokeTokenOfKey(hashSecret(token), {
        apiKeyId: by.apiKeyId,
        now: clock.now(),
        audit: (id) => id === undefined ? undefined : toRevokedAudit(id, by),
      });
    },
  };
}
