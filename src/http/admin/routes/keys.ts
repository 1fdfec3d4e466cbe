/**
 * `/admin/v1/…keys…` and tokens: a user's keys with their last use, creating
 * a key (shown once), rotating with grace, disabling, enabling and revoking;
 * a user's tokens (never the tokens themselves) and revoking one. Each
 * change calls one domain function (src/auth/keys.ts, admin_tasks.ts).
 *
 * @module
 */
import { listKeys, revokeTokenById } from "../../../auth/admin_tasks.ts";
import { AuthError } from "../../../auth/errors.ts";
import {
  createKey,
  DEFAULT_ROTATION_GRACE_SECONDS,
  revokeKey,
  rotateKey,
  setKeyDisabled,
} from "../../../auth/keys.ts";
import { parseDuration } from "../../../platform/duration.ts";
import type { ApiKey } from "../../../store/store.ts";
import type { AdminContext, AdminRoute } from "../admin_router.ts";
import {
  allowFields,
  type JsonObject,
  optionalBoolean,
  optionalString,
  readJsonObject,
  toIso,
  toJson,
  toLimit,
  toRowId,
} from "../admin_json.ts";
import { readCursor, toPage } from "../cursor.ts";
import { toKeyView, toTokenView } from "../views.ts";
import { findUserParam } from "./users.ts";

async function findKeyParam(context: AdminContext): Promise<ApiKey> {
  const id = toRowId(context.params.id, "API key");
  const key = await context.deps.store.findApiKeyById(id);
  if (key === undefined) throw new AuthError("not_found", `No API key ${id}`);
  return key;
}

/** A duration field (`"30d"`), in seconds; `"0"` only where `allowZero`. */
function toSeconds(body: JsonObject, name: string, allowZero = false): number | undefined {
  const text = optionalString(body, name, 32);
  if (text === undefined) return undefined;
  if (allowZero && text === "0") return 0;
  try {
    return parseDuration(text);
  } catch (error) {
    throw new AuthError("invalid_request", `Invalid "${name}": ${(error as Error).message}`);
  }
}

/** A key list's cursor: the owner's e-mail and the key's id. */
function toKeyCursor(url: URL): { email: string; id: number } | undefined {
  const cursor = readCursor(url, ["string", "number"]);
  return cursor && { email: cursor[0] as string, id: cursor[1] as number };
}

async function keyDetail(context: AdminContext, id: number) {
  const key = await context.deps.store.findApiKeyById(id);
  if (key === undefined) throw new AuthError("not_found", `No API key ${id}`);
  return toKeyView(key, context.deps.clock.now());
}

export const KEY_ROUTES: readonly AdminRoute[] = [
  {
    method: "GET",
    path: "/admin/v1/keys",
    caller: "operator",
    async handle(_request, { deps, url }) {
      const unused = url.searchParams.get("unused");
      let unusedSeconds: number | undefined;
      if (unused !== null) {
        try {
          unusedSeconds = parseDuration(unused);
        } catch (error) {
          throw new AuthError("invalid_request", `Invalid "unused": ${(error as Error).message}`);
        }
      }
      const now = deps.clock.now();
      const limit = toLimit(url);
      const keys = await listKeys(deps.store, {
        now,
        unusedSeconds,
        after: toKeyCursor(url),
        limit: limit + 1,
      });
      const page = toPage(keys, limit, (key) => [key.email, key.id]);
      return toJson({ keys: page.rows.map((key) => toKeyView(key, now)), next: page.next });
    },
  },
  {
    method: "GET",
    path: "/admin/v1/users/:id/keys",
    caller: "operator",
    async handle(_request, context) {
      const user = await findUserParam(context);
      const now = context.deps.clock.now();
      const limit = toLimit(context.url);
      const keys = await listKeys(context.deps.store, {
        now,
        userId: user.id,
        after: toKeyCursor(context.url),
        limit: limit + 1,
      });
      const page = toPage(keys, limit, (key) => [key.email, key.id]);
      return toJson({ keys: page.rows.map((key) => toKeyView(key, now)), next: page.next });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/users/:id/keys",
    caller: "writer",
    async handle(request, context) {
      const user = await findUserParam(context);
      const body = await readJsonObject(request);
      allowFields(body, ["label", "expires_in", "introspect"]);
      const { key, apiKey } = await createKey(context.changes, user, {
        label: optionalString(body, "label", 1024),
        expiresInSeconds: toSeconds(body, "expires_in"),
        introspect: optionalBoolean(body, "introspect"),
      });
      return toJson({ key: toKeyView(key, context.deps.clock.now()), api_key: apiKey }, 201);
    },
  },
  {
    method: "GET",
    path: "/admin/v1/keys/:id",
    caller: "operator",
    async handle(_request, context) {
      return toJson(await keyDetail(context, (await findKeyParam(context)).id));
    },
  },
  {
    method: "POST",
    path: "/admin/v1/keys/:id/rotate",
    caller: "writer",
    async handle(request, context) {
      const old = await findKeyParam(context);
      const body = await readJsonObject(request);
      allowFields(body, ["grace"]);
      const grace = toSeconds(body, "grace", true) ?? DEFAULT_ROTATION_GRACE_SECONDS;
      const { key, apiKey, oldKeyUntil } = await rotateKey(context.changes, old, grace);
      return toJson({
        key: toKeyView(key, context.deps.clock.now()),
        api_key: apiKey,
        old_key: await keyDetail(context, old.id),
        old_key_until: toIso(oldKeyUntil),
      }, 201);
    },
  },
  {
    method: "POST",
    path: "/admin/v1/keys/:id/disable",
    caller: "writer",
    async handle(_request, context) {
      const key = await findKeyParam(context);
      await setKeyDisabled(context.changes, key, true);
      return toJson(await keyDetail(context, key.id));
    },
  },
  {
    method: "POST",
    path: "/admin/v1/keys/:id/enable",
    caller: "writer",
    async handle(_request, context) {
      const key = await findKeyParam(context);
      await setKeyDisabled(context.changes, key, false);
      return toJson(await keyDetail(context, key.id));
    },
  },
  {
    method: "POST",
    path: "/admin/v1/keys/:id/revoke",
    caller: "writer",
    async handle(_request, context) {
      const key = await findKeyParam(context);
      const revoked = await revokeKey(context.changes, key);
      return toJson({ ...(await keyDetail(context, key.id)), tokens_revoked: revoked ?? 0 });
    },
  },
  {
    method: "GET",
    path: "/admin/v1/users/:id/tokens",
    caller: "operator",
    async handle(_request, context) {
      const user = await findUserParam(context);
      const { url } = context;
      const live = url.searchParams.get("live");
      if (live !== null && live !== "true" && live !== "false") {
        throw new AuthError("invalid_request", 'Invalid "live": expected true or false');
      }
      const limit = toLimit(url);
      const tokens = await context.deps.store.searchTokensOfUser(user.id, {
        now: context.deps.clock.now(),
        beforeId: readCursor(url, ["number"])?.[0] as number | undefined,
        liveOnly: live === "true",
        limit: limit + 1,
      });
      const page = toPage(tokens, limit, (token) => [token.id]);
      return toJson({ tokens: page.rows.map(toTokenView), next: page.next });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/tokens/:id/revoke",
    caller: "writer",
    async handle(_request, context) {
      const id = toRowId(context.params.id, "token");
      return toJson({ id, revoked: await revokeTokenById(context.changes, id) });
    },
  },
];
