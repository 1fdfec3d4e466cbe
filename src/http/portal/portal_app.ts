/**
 * The developer portal's edge on the public listener (docs/portal.md): its pages under
 * `/portal/` (no build step, nothing inline, a strict Content-Security-Policy, as the admin
 * console) and its JSON API under `/api/portal/v1/`, routed through a route table of their
 * own. Every handler parses, calls one use case of src/auth/portal/, and renders JSON.
 *
 * Sessions: a `__Host-` cookie (Secure, HttpOnly, SameSite=Strict, Path=/) holds the session
 * id; only its digest is stored. CSRF: every change needs a JSON body (a form cannot send
 * one, and a cross-origin `fetch` of one needs a preflight, which these paths refuse), an
 * `Origin`, when sent, equal to the portal's, and, once signed in, the session's CSRF token in
 * `X-CSRF-Token`. Errors are `{"error": {code, message}}`, as on the admin API.
 *
 * @module
 */
import {
  type PortalAccountDeps,
  type PortalClient,
  toPortalChangeDeps,
} from "../../auth/portal/account_deps.ts";
import { signUp, verifyEmail } from "../../auth/portal/accounts.ts";
import { requestPasswordReset, resetPassword } from "../../auth/portal/password_reset.ts";
import { findSessionUser, signIn, signOut } from "../../auth/portal/sessions.ts";
import { isSameDigest, toCsrfToken } from "../../auth/portal/codes.ts";
import {
  changeOwnPassword,
  confirmEmailChange,
  deleteOwnAccount,
  requestEmailChange,
} from "../../auth/portal/own_account.ts";
import {
  createOwnKey,
  labelOwnKey,
  listOwnKeys,
  listOwnTokens,
  revokeOwnKey,
  revokeOwnToken,
  rotateOwnKey,
} from "../../auth/portal/own_keys.ts";
import type { Logger } from "../../platform/logger.ts";
import type { User } from "../../store/store.ts";
import {
  allowFields,
  type JsonObject,
  optionalString,
  readJsonObject,
  requiredString,
  toJson,
  toRowId,
} from "../admin/admin_json.ts";
import { HttpError } from "../errors.ts";
import type { HandlerContext } from "../request_context.ts";
import { createRouteTable, isRouteMatch, methodNotAllowed, type Route } from "../route_table.ts";
import { loadPortalAssets, type PortalAssets } from "./portal_assets.ts";

/** The session cookie's name (the `__Host-` prefix: Secure, Path=/, no Domain). */
export const SESSION_COOKIE = "__Host-keygate_portal";
/** Where the portal's JSON API lives. */
export const PORTAL_API = "/api/portal/v1";

/** The portal's pages' policy: this origin only, nothing inline, no frames, no referrer. */
export const PORTAL_SECURITY_HEADERS: readonly [string, string][] = [
  [
    "content-security-policy",
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  ],
  ["referrer-policy", "no-referrer"],
  ["x-frame-options", "DENY"],
  ["cross-origin-opener-policy", "same-origin"],
  ["cross-origin-resource-policy", "same-origin"],
];

/** What the portal's edge needs. */
export interface PortalDeps extends PortalAccountDeps {
  /**
   * The portal's public origin (`--portal-origin`): mail links and the only `Origin` changes
   * accept. Never derived from the request's Host, which a client chooses.
   */
  origin: string;
  /** Told after a change queued mail in this process (the mailer reads the outbox now). */
  onMailQueued?: () => void;
  assets?: PortalAssets;
  /** Where a failed deferred task (forgot-password's code) is logged. */
  logger?: Logger;
}

type PortalHandler = (request: Request, call: PortalCall) => Promise<Response> | Response;

interface PortalCall {
  context: HandlerContext;
  params: Record<string, string>;
  client: PortalClient;
  origin: string;
}

interface SignedIn {
  user: User;
  sessionId: string;
}

/** Whether a request's raw path is the portal's. */
export function isPortalPath(rawPath: string): boolean {
  return rawPath === "/portal" || rawPath.startsWith("/portal/") ||
    rawPath.startsWith(`${PORTAL_API}/`);
}

function readCookie(request: Request, name: string): string | undefined {
  for (const part of (request.headers.get("cookie") ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function sessionCookie(value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`;
}

const ACCEPTED = {
  status: "accepted",
  message: "If the address can be used, a message is on its way to it",
};

/** Creates the portal's handler. */
export function createPortalHandler(deps: PortalDeps) {
  const assets = deps.assets ?? loadPortalAssets();
  const mailed = () => deps.onMailQueued?.();
  // After the answer: forgot-password's account-dependent work (see `defer`, accounts.ts).
  const accountDeps: PortalAccountDeps = {
    ...deps,
    defer(task) {
      setTimeout(() => {
        task().then(mailed, (error) => {
          deps.logger?.error("portal task failed", {
            error: error instanceof Error ? error.message.slice(0, 200) : String(error),
          });
        });
      }, 0);
    },
  };

  async function readChange(
    request: Request,
    call: PortalCall,
    fields: readonly string[],
  ): Promise<JsonObject> {
    const origin = request.headers.get("origin");
    if (origin !== null && origin !== call.origin) {
      throw new HttpError(
        403,
        "forbidden",
        "Cross-origin request refused: Origin is not the portal's",
      );
    }
    const type = request.headers.get("content-type");
    if (type === null || !/^application\/json\s*(;|$)/i.test(type)) {
      throw new HttpError(
        415,
        "unsupported_media_type",
        "Unsupported Content-Type: send application/json",
      );
    }
    const body = await readJsonObject(request);
    allowFields(body, fields);
    return body;
  }

  async function requireSession(request: Request, change: boolean): Promise<SignedIn> {
    const sessionId = readCookie(request, SESSION_COOKIE) ?? "";
    const found = await findSessionUser(deps, sessionId);
    if (found === undefined) {
      throw new HttpError(
        401,
        "not_signed_in",
        "Not signed in, or the session has ended: sign in again",
      );
    }
    if (change) {
      const sent = request.headers.get("x-csrf-token") ?? "";
      const expected = toCsrfToken(sessionId);
      const te = new TextEncoder();
      if (
        !isSameDigest(te.encode(sent.padEnd(expected.length).slice(0, 200)), te.encode(expected))
      ) {
        throw new HttpError(403, "csrf_failed", "Missing or wrong X-CSRF-Token: reload the page");
      }
    }
    return { user: found.user, sessionId };
  }

  function changeDeps(user: User) {
    return { ...toPortalChangeDeps(deps, user), hasher: deps.hasher };
  }

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

  const page: PortalHandler = () => assets.page();
  const api = (path: string) => `${PORTAL_API}${path}`;
  const routes: Route<PortalCall>[] = [
    { method: "GET", path: "/portal", caller: "anyone", handle: page },
    { method: "GET", path: "/portal/verify", caller: "anyone", handle: page },
    { method: "GET", path: "/portal/reset", caller: "anyone", handle: page },
    { method: "GET", path: "/portal/email", caller: "anyone", handle: page },
    ...assets.files.map((path): Route<PortalCall> => ({
      method: "GET",
      path,
      caller: "anyone",
      handle: () => assets.file(path),
    })),
    {
      method: "POST",
      path: api("/signup"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["email", "password"]);
        await signUp(deps, call.client, {
          email: requiredString(body, "email", 254),
          password: body.password,
        });
        mailed();
        return toJson(ACCEPTED, 202);
      },
    },
    {
      method: "POST",
      path: api("/verify"),
      caller: "anyone",
      async handle(request, call) {
        // Verify and sign in, in one step: the code and the password signed up with.
        const body = await readChange(request, call, ["email", "code", "password"]);
        const verified = await verifyEmail(deps, call.client, {
          email: requiredString(body, "email", 254),
          code: requiredString(body, "code", 64),
          password: body.password,
        });
        if (verified.state !== "active") return toJson({ state: verified.state });
        const { sessionId, expiresAt } = verified.session;
        const response = toJson({
          state: verified.state,
          expires_at: new Date(expiresAt).toISOString(),
          csrf_token: toCsrfToken(sessionId),
        });
        const seconds = Math.floor((expiresAt - deps.clock.now()) / 1000);
        response.headers.set("set-cookie", sessionCookie(sessionId, seconds));
        return response;
      },
    },
    {
      method: "POST",
      path: api("/signin"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["email", "password"]);
        const session = await signIn(deps, call.client, {
          email: requiredString(body, "email", 254),
          password: body.password,
        }, request.signal);
        const response = toJson({
          expires_at: new Date(session.expiresAt).toISOString(),
          csrf_token: toCsrfToken(session.sessionId),
        });
        const seconds = Math.floor((session.expiresAt - deps.clock.now()) / 1000);
        response.headers.set("set-cookie", sessionCookie(session.sessionId, seconds));
        return response;
      },
    },
    {
      method: "POST",
      path: api("/forgot"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["email"]);
        await requestPasswordReset(accountDeps, call.client, {
          email: requiredString(body, "email", 254),
        });
        mailed();
        return toJson(ACCEPTED, 202);
      },
    },
    {
      method: "POST",
      path: api("/reset"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["email", "code", "password"]);
        const ended = await resetPassword(deps, call.client, {
          email: requiredString(body, "email", 254),
          code: requiredString(body, "code", 64),
          password: body.password,
        });
        mailed();
        return toJson({ status: "password_changed", tokens_revoked: ended });
      },
    },
    {
      method: "GET",
      path: api("/session"),
      caller: "anyone",
      async handle(request) {
        const { user, sessionId } = await requireSession(request, false);
        return toJson({ email: user.email, csrf_token: toCsrfToken(sessionId) });
      },
    },
    {
      method: "POST",
      path: api("/signout"),
      caller: "anyone",
      async handle(request, call) {
        await readChange(request, call, []);
        const { user, sessionId } = await requireSession(request, true);
        await signOut(deps, user, sessionId);
        return new Response(null, { status: 204, headers: { "set-cookie": sessionCookie("", 0) } });
      },
    },
    {
      method: "GET",
      path: api("/keys"),
      caller: "anyone",
      async handle(request) {
        const { user } = await requireSession(request, false);
        const keys = await listOwnKeys(changeDeps(user), user);
        return toJson({
          keys: keys.map((key) => ({
            ...toKeyJson(key),
            status: key.status,
            last_used_at: key.lastUsedAt === null ? null : new Date(key.lastUsedAt).toISOString(),
            replaced_by: key.replacedBy,
          })),
        });
      },
    },
    {
      method: "POST",
      path: api("/keys"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["label"]);
        const { user } = await requireSession(request, true);
        const created = await createOwnKey(
          changeDeps(user),
          user,
          optionalString(body, "label", 200) ?? "",
        );
        return toJson({ key: toKeyJson(created.key), api_key: created.apiKey }, 201);
      },
    },
    {
      method: "POST",
      path: api("/keys/:id/rotate"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["grace_seconds"]);
        const { user } = await requireSession(request, true);
        const grace = body.grace_seconds;
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
        const rotated = await rotateOwnKey(
          changeDeps(user),
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
    },
    {
      method: "DELETE",
      path: api("/keys/:id"),
      caller: "anyone",
      async handle(request, call) {
        checkOrigin(request, call);
        const { user } = await requireSession(request, true);
        const ended = await revokeOwnKey(
          changeDeps(user),
          user,
          toRowId(call.params.id, "API key"),
        );
        return toJson({ status: "revoked", tokens_revoked: ended });
      },
    },
    {
      method: "GET",
      path: api("/tokens"),
      caller: "anyone",
      async handle(request) {
        const { user } = await requireSession(request, false);
        const tokens = await listOwnTokens(changeDeps(user), user);
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
    },
    {
      method: "DELETE",
      path: api("/tokens/:id"),
      caller: "anyone",
      async handle(request, call) {
        checkOrigin(request, call);
        const { user } = await requireSession(request, true);
        const done = await revokeOwnToken(changeDeps(user), user, toRowId(call.params.id, "token"));
        return toJson({ status: done ? "revoked" : "already_ended" });
      },
    },
    {
      method: "PATCH",
      path: api("/keys/:id"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["label"]);
        const { user } = await requireSession(request, true);
        const id = toRowId(call.params.id, "API key");
        await labelOwnKey(changeDeps(user), user, id, requiredString(body, "label", 200));
        return toJson({ status: "labelled", id });
      },
    },
    {
      method: "POST",
      path: api("/password"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["current_password", "password"]);
        const { user, sessionId } = await requireSession(request, true);
        const ended = await changeOwnPassword(deps, call.client, user, {
          current: body.current_password,
          password: body.password,
          sessionId,
        });
        mailed();
        return toJson({ status: "password_changed", tokens_revoked: ended });
      },
    },
    {
      method: "POST",
      path: api("/email"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["email", "password"]);
        const { user } = await requireSession(request, true);
        await requestEmailChange(deps, call.client, user, {
          email: requiredString(body, "email", 254),
          password: body.password,
        });
        mailed();
        return toJson(ACCEPTED, 202);
      },
    },
    {
      method: "POST",
      path: api("/email/confirm"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["code"]);
        const { user } = await requireSession(request, true);
        const email = await confirmEmailChange(deps, call.client, user, {
          code: requiredString(body, "code", 64),
        });
        mailed();
        return toJson({ status: "email_changed", email });
      },
    },
    {
      method: "POST",
      path: api("/account/delete"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["password"]);
        const { user } = await requireSession(request, true);
        const deleted = await deleteOwnAccount(deps, call.client, user, {
          password: body.password,
        });
        const response = toJson({
          status: "deleted",
          api_keys_deleted: deleted.apiKeys,
          tokens_deleted: deleted.tokens,
        });
        response.headers.set("set-cookie", sessionCookie("", 0));
        return response;
      },
    },
  ];
  const table = createRouteTable(routes, { headAsGet: true });

  function checkOrigin(request: Request, call: PortalCall): void {
    const origin = request.headers.get("origin");
    if (origin !== null && origin !== call.origin) {
      throw new HttpError(
        403,
        "forbidden",
        "Cross-origin request refused: Origin is not the portal's",
      );
    }
  }

  /** Answers a request whose raw path {@link isPortalPath} accepted. */
  return async function handlePortal(request: Request, context: HandlerContext): Promise<Response> {
    const path = context.rawPath.replace(/\/+$/, "") || "/";
    const found = table.match(request.method, path);
    if (found === undefined) throw new HttpError(404, "not_found", "No such page or endpoint");
    if (!isRouteMatch(found)) throw methodNotAllowed(request.method, found);
    const origin = deps.origin;
    const client: PortalClient = { address: context.clientAddress, links: { origin } };
    const response = await found.route.handle(request, {
      context,
      params: found.params,
      client,
      origin,
    });
    for (const [name, value] of PORTAL_SECURITY_HEADERS) response.headers.set(name, value);
    return response;
  };
}
