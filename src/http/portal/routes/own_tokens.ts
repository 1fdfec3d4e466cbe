/**
 * The signed-in user's own tokens: list and revoke.
 *
 * @module
 */
import { listOwnTokens, revokeOwnToken } from "../../../auth/portal/own_keys.ts";
import { toJson, toRowId } from "../../admin/admin_json.ts";
import {
  type PortalRoute,
  type PortalRouteDeps,
  sessionRoute,
  toApiPath,
  toUserChangeDeps,
} from "../portal_request.ts";

/** `GET /tokens` and `DELETE /tokens/:id`. */
export function createOwnTokenRoutes({ deps }: PortalRouteDeps): PortalRoute[] {
  return [
    sessionRoute({
      method: "GET",
      path: toApiPath("/tokens"),
      caller: "session",
      async handle(_request, call) {
        const { user } = call.session;
        const tokens = await listOwnTokens(toUserChangeDeps(deps, user), user);
        return toJson({
          tokens: tokens.map((t) => ({
            id: t.id,
            api_key_id: t.apiKeyId,
            issued_at: new Date(t.issuedAt).toISOString(),
            expires_at: new Date(t.expiresAt).toISOString(),
            state: t.state,
          })),
        });
      },
    }),
    sessionRoute({
      method: "DELETE",
      path: toApiPath("/tokens/:id"),
      caller: "session+csrf",
      async handle(_request, call) {
        const { user } = call.session;
        const done = await revokeOwnToken(
          toUserChangeDeps(deps, user),
          user,
          toRowId(call.params.id, "token"),
        );
        return toJson({ status: done ? "revoked" : "already_ended" });
      },
    }),
  ];
}
