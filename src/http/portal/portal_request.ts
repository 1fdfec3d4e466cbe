/**
 * What every route of the developer portal shares: the per-request call, the route's
 * dependencies, and the request and response helpers — the session cookie, the CSRF and
 * `Origin` checks, the JSON body of a change, the key's JSON form (see portal_app.ts).
 *
 * @module
 */
import {
  type PortalAccountDeps,
  type PortalClient,
  toPortalChangeDeps,
} from "../../auth/portal/account_deps.ts";
import { findSessionUser } from "../../auth/portal/sessions.ts";
import { isSameDigest, toCsrfToken } from "../../auth/portal/codes.ts";
import type { Logger } from "../../platform/logger.ts";
import type { User } from "../../store/store.ts";
import { allowFields, type JsonObject, readJsonObject } from "../admin/admin_json.ts";
import { HttpError } from "../errors.ts";
import type { HandlerContext } from "../request_context.ts";
import type { Route } from "../route_table.ts";
import type { PortalAssets } from "./portal_assets.ts";

/** The session cookie's name (the `__Host-` prefix: Secure, Path=/, no Domain). */
export const SESSION_COOKIE = "__Host-keygate_portal";
/** Where the portal's JSON API lives. */
export const PORTAL_API = "/api/portal/v1";

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

/** What a portal route is given besides the request. */
export interface PortalCall {
  context: HandlerContext;
  params: Record<string, string>;
  client: PortalClient;
  origin: string;
  /** The signed-in user and session, when the route's caller is `session` or `session+csrf`. */
  session?: SignedIn;
}

/** What a route for signed-in users is given: the dispatcher checked the session. */
export interface SessionCall extends PortalCall {
  session: SignedIn;
}

/** One row of the portal's route table. */
export type PortalRoute = Route<PortalCall>;

/** A route for signed-in users (see {@link sessionRoute}). */
export interface SessionRouteOptions {
  method: string;
  path: string;
  /** `session+csrf` for a change: the dispatcher also checks `Origin` and `X-CSRF-Token`. */
  caller: "session" | "session+csrf";
  handle(request: Request, call: SessionCall): Response | Promise<Response>;
}

/**
 * A row whose handler runs only for a signed-in user: the portal's dispatcher checks the
 * session (and, for `session+csrf`, the Origin and CSRF token) before it, from `caller`.
 */
export function sessionRoute(options: SessionRouteOptions): PortalRoute {
  const { method, path, caller, handle } = options;
  return {
    method,
    path,
    caller,
    handle(request, call) {
      const { session } = call;
      // The dispatcher (portal_app.ts) sets it for these callers; without it, a bug, not a 401.
      if (session === undefined) throw new Error(`${method} ${path}: session not checked`);
      return handle(request, { ...call, session });
    },
  };
}

/** What the route modules are built from (once, by createPortalHandler). */
export interface PortalRouteDeps {
  deps: PortalDeps;
  /** {@link deps} with forgot-password's `defer` (the work after the answer). */
  accountDeps: PortalAccountDeps;
  /** Tells the mailer that a change queued mail. */
  mailed(): void;
}

/** A signed-in request's user and session. */
export interface SignedIn {
  user: User;
  sessionId: string;
}

/** The answer to sign-up, forgot-password and change of e-mail, whoever the address is. */
export const ACCEPTED = {
  status: "accepted",
  message: "If the address can be used, a message is on its way to it",
};

/** A route path under {@link PORTAL_API}. */
export function toApiPath(path: string): string {
  return `${PORTAL_API}${path}`;
}

function readCookie(request: Request, name: string): string | undefined {
  for (const part of (request.headers.get("cookie") ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The `Set-Cookie` value of the session cookie (`""` and 0 end it). */
export function toSessionCookie(value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`;
}

/** @throws {HttpError} 403 when the request's `Origin`, if sent, is not the portal's. */
export function checkOrigin(request: Request, call: PortalCall): void {
  const origin = request.headers.get("origin");
  if (origin !== null && origin !== call.origin) {
    throw new HttpError(
      403,
      "forbidden",
      "Cross-origin request refused: Origin is not the portal's",
    );
  }
}

/**
 * A change's JSON body, after the `Origin` check, with only `fields` allowed (a route for
 * anyone: for `session+csrf` the dispatcher checked the Origin, see {@link readChangeBody}).
 * @throws {HttpError} 403 for another origin, 415 for another media type.
 */
export function readChange(
  request: Request,
  call: PortalCall,
  fields: readonly string[],
): Promise<JsonObject> {
  checkOrigin(request, call);
  return readChangeBody(request, fields);
}

/**
 * A change's JSON body with only `fields` allowed.
 * @throws {HttpError} 415 for another media type, 400 for a body that is not such an object.
 */
export async function readChangeBody(
  request: Request,
  fields: readonly string[],
): Promise<JsonObject> {
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

/**
 * The session's user; for a `change`, also checks the session's CSRF token. Called by the
 * dispatcher (portal_app.ts) for the routes whose caller says so, never by a handler.
 * @throws {HttpError} 401 without a live session, 403 for a missing or wrong CSRF token.
 */
export async function requireSession(
  deps: PortalDeps,
  request: Request,
  change: boolean,
): Promise<SignedIn> {
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

/** The domain's change dependencies for a signed-in user (actor: the user), with the hasher. */
export function toUserChangeDeps(deps: PortalDeps, user: User) {
  return { ...toPortalChangeDeps(deps, user), hasher: deps.hasher };
}
