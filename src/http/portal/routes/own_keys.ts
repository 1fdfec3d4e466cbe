/**
 * The signed-in user's own API keys: list, create (the key is in the answer, once), rotate
 * with overlap, revoke, label.
 *
 * @module
 */
import {
  createOwnKey,
  labelOwnKey,
  listOwnKeys,
  revokeOwnKey,
  rotateOwnKey,
} from "../../../auth/portal/own_keys.ts";
import { optionalString, requiredString, toJson, toRowId } from "../../admin/admin_json.ts";
import { HttpError } from "../../errors.ts";
import {
  type PortalRoute,
  type PortalRouteDeps,
  readChangeBody,
  sessionRoute,
  toApiPath,
  toUserChangeDeps,
} from "../portal_request.ts";

function toKeyJson(
  key: { id: number; prefix: string; label: string; createdAt: number; expiresAt: number | null },
) {
  return {
    id: key.id,
    prefix: key.prefix,
    label: key.label,
    created_at: new Date(key.createdAt).toISOString(),
    expires_at: key.expiresAt === null ? null : new Date(key.expiresAt).toISOString(),
  };
}

function toGraceSeconds(grace: unknown): number | undefined {
  if (
    grace !== undefined &&
    (typeof grace !== "number" || !Number.isInteger(grace) || grace < 0)
  ) {
    throw new HttpError(
      400,
      "invalid_request",
      'Invalid "grace_seconds": expected a whole number ≥ 0',
    );
  }
  return grace;
}

/** `GET`/`POST /keys`, `POST /keys/:id/rotate`, `DELETE`/`PATCH /keys/:id`. */
export function createOwnKeyRoutes({ deps }: PortalRouteDeps): PortalRoute[] {
  return [
    sessionRoute({
      method: "GET",
      path: toApiPath("/keys"),
      caller: "session",
      async handle(_request, call) {
        const { user } = call.session;
        const keys = await listOwnKeys(toUserChangeDeps(deps, user), user);
        return toJson({
          keys: keys.map((key) => ({
            ...toKeyJson(key),
            status: key.status,
            last_used_at: key.lastUsedAt === null ? null : new Date(key.lastUsedAt).toISOString(),
            replaced_by: key.replacedBy,
          })),
        });
      },
    }),
    sessionRoute({
      method: "POST",
      path: toApiPath("/keys"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user } = call.session;
        const body = await readChangeBody(request, ["label"]);
        const created = await createOwnKey(
          toUserChangeDeps(deps, user),
          user,
          optionalString(body, "label", 200) ?? "",
        );
        return toJson({ key: toKeyJson(created.key), api_key: created.apiKey }, 201);
      },
    }),
    sessionRoute({
      method: "POST",
      path: toApiPath("/keys/:id/rotate"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user } = call.session;
        const body = await readChangeBody(request, ["grace_seconds"]);
        const grace = toGraceSeconds(body.grace_seconds);
        const rotated = await rotateOwnKey(
          toUserChangeDeps(deps, user),
          user,
          toRowId(call.params.id, "API key"),
          grace,
        );
        return toJson({
          key: toKeyJson(rotated.key),
          api_key: rotated.apiKey,
          old_key_until: new Date(rotated.oldKeyUntil).toISOString(),
        }, 201);
      },
    }),
    sessionRoute({
      method: "DELETE",
      path: toApiPath("/keys/:id"),
      caller: "session+csrf",
      async handle(_request, call) {
        const { user } = call.session;
        const ended = await revokeOwnKey(
          toUserChangeDeps(deps, user),
          user,
          toRowId(call.params.id, "API key"),
        );
        return toJson({ status: "revoked", tokens_revoked: ended });
      },
    }),
    sessionRoute({
      method: "PATCH",
      path: toApiPath("/keys/:id"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user } = call.session;
        const body = await readChangeBody(request, ["label"]);
        const id = toRowId(call.params.id, "API key");
        await labelOwnKey(
          toUserChangeDeps(deps, user),
          user,
          id,
          requiredString(body, "label", 200),
        );
        return toJson({ status: "labelled", id });
      },
    }),
  ];
}
