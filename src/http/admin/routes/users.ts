/**
 * `/admin/v1/users…`: list and search, create, details, token lifetime,
 * password, disable and enable, and revoking a user's tokens. Each change
 * calls one domain function of src/auth/users.ts, as the admin CLI does.
 *
 * @module
 */
import { isPasswordSized, MAX_PASSWORD_BYTES } from "../../../auth/account_rules.ts";
import { AuthError } from "../../../auth/errors.ts";
import {
  addUser,
  changeUserPassword,
  changeUserTimeout,
  deleteUser,
  renameUser,
  revokeUserTokens,
  setUserDisabled,
} from "../../../auth/users.ts";
import { parseDuration } from "../../../platform/duration.ts";
import type { User } from "../../../store/store.ts";
import type { AdminContext, AdminRoute } from "../admin_router.ts";
import {
  allowFields,
  type JsonObject,
  optionalString,
  readJsonObject,
  requiredString,
  toInstant,
  toJson,
  toLimit,
  toRowId,
} from "../admin_json.ts";
import { readCursor, toPage } from "../cursor.ts";
import { toUserView } from "../views.ts";

/** The user a route's `:id` names. @throws {AuthError} `not_found`. */
export async function findUserParam(context: AdminContext): Promise<User> {
  const id = toRowId(context.params.id, "user");
  const user = await context.deps.store.findUserById(id);
  if (user === undefined) throw new AuthError("not_found", `No user ${id}`);
  return user;
}

function toPassword(body: JsonObject): string {
  const password = requiredString(body, "password", 4 * MAX_PASSWORD_BYTES);
  if (!isPasswordSized(password)) {
    throw new AuthError(
      "invalid_request",
      `Invalid "password": expected 1 to ${MAX_PASSWORD_BYTES} bytes`,
    );
  }
  return password;
}

/** `"10h"` → seconds, `null` → the server's default. */
function toTimeout(body: JsonObject): number | null {
  const value = body.token_timeout;
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") {
    throw new AuthError("invalid_request", 'Invalid "token_timeout": expected "10h" or null');
  }
  try {
    return parseDuration(value);
  } catch (error) {
    throw new AuthError("invalid_request", `Invalid "token_timeout": ${(error as Error).message}`);
  }
}

function userDetail(context: AdminContext, user: User) {
  return {
    ...toUserView(user),
    effective_token_timeout_seconds: user.tokenTimeoutSeconds ??
      context.deps.defaultTimeoutSeconds,
  };
}

export const USER_ROUTES: readonly AdminRoute[] = [
  {
    method: "GET",
    path: "/admin/v1/users",
    caller: "operator",
    async handle(_request, { deps, url }) {
      const limit = toLimit(url);
      const cursor = readCursor(url, ["string"]);
      const users = await deps.store.searchUsers({
        search: url.searchParams.get("search")?.slice(0, 254) || undefined,
        afterEmail: cursor?.[0] as string | undefined,
        limit: limit + 1,
      });
      const page = toPage(users, limit, (user) => [user.email]);
      return toJson({ users: page.rows.map(toUserView), next: page.next });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/users",
    caller: "writer",
    async handle(request, context) {
      const body = await readJsonObject(request);
      allowFields(body, ["email", "password", "token_timeout"]);
      const email = requiredString(body, "email", 254);
      const password = toPassword(body);
      const tokenTimeoutSeconds = toTimeout(body);
      const user = await addUser(context.accounts, { email, password, tokenTimeoutSeconds });
      return toJson(userDetail(context, user), 201);
    },
  },
  {
    method: "GET",
    path: "/admin/v1/users/:id",
    caller: "operator",
    async handle(_request, context) {
      return toJson(userDetail(context, await findUserParam(context)));
    },
  },
  {
    method: "PUT",
    path: "/admin/v1/users/:id/token-timeout",
    caller: "writer",
    async handle(request, context) {
      const user = await findUserParam(context);
      const body = await readJsonObject(request);
      allowFields(body, ["token_timeout"]);
      if (!("token_timeout" in body)) {
        throw new AuthError("invalid_request", 'Missing "token_timeout"');
      }
      await changeUserTimeout(context.changes, user, toTimeout(body));
      return toJson(userDetail(context, await findUserParam(context)));
    },
  },
  {
    method: "PUT",
    path: "/admin/v1/users/:id/email",
    caller: "writer",
    async handle(request, context) {
      const user = await findUserParam(context);
      const body = await readJsonObject(request);
      allowFields(body, ["email"]);
      await renameUser(context.changes, user, requiredString(body, "email", 254));
      return toJson(userDetail(context, await findUserParam(context)));
    },
  },
  {
    method: "DELETE",
    path: "/admin/v1/users/:id",
    caller: "writer",
    async handle(_request, context) {
      const deleted = await deleteUser(context.changes, await findUserParam(context));
      return toJson({ api_keys_deleted: deleted.apiKeys, tokens_deleted: deleted.tokens });
    },
  },
  {
    method: "PUT",
    path: "/admin/v1/users/:id/password",
    caller: "writer",
    async handle(request, context) {
      const user = await findUserParam(context);
      const body = await readJsonObject(request);
      allowFields(body, ["password"]);
      const revoked = await changeUserPassword(context.accounts, user, toPassword(body));
      return toJson({ tokens_revoked: revoked });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/users/:id/disable",
    caller: "writer",
    async handle(_request, context) {
      const revoked = await setUserDisabled(context.changes, await findUserParam(context), true);
      return toJson({
        ...userDetail(context, await findUserParam(context)),
        tokens_revoked: revoked,
      });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/users/:id/enable",
    caller: "writer",
    async handle(_request, context) {
      await setUserDisabled(context.changes, await findUserParam(context), false);
      return toJson({ ...userDetail(context, await findUserParam(context)), tokens_revoked: 0 });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/users/:id/tokens/revoke",
    caller: "writer",
    async handle(request, context) {
      const user = await findUserParam(context);
      const body = await readJsonObject(request);
      allowFields(body, ["before"]);
      const before = optionalString(body, "before", 64);
      const revoked = await revokeUserTokens(
        context.changes,
        user,
        before === undefined ? undefined : toInstant(before, "before"),
      );
      return toJson({ tokens_revoked: revoked });
    },
  },
];
