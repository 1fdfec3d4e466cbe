/**
 * The developer portal's edge on the public listener (docs/portal.md): its pages under
 * `/portal/` (no build step, nothing inline, a strict Content-Security-Policy, as the admin
 * console) and its JSON API under `/api/portal/v1/`, routed through a route table of their
 * own, built here from one module per concern (routes/). Every handler parses, calls one use
 * case of src/auth/portal/, and renders JSON.
 *
 * Sessions: a `__Host-` cookie (Secure, HttpOnly, SameSite=Strict, Path=/) holds the session
 * id; only its digest is stored. CSRF: every change needs a JSON body (a form cannot send
 * one, and a cross-origin `fetch` of one needs a preflight, which these paths refuse), an
 * `Origin`, when sent, equal to the portal's, and, once signed in, the session's CSRF token in
 * `X-CSRF-Token` (portal_request.ts). Errors are `{"error": {code, message}}`, as on the admin
 * API.
 *
 * @module
 */
import type { PortalAccountDeps, PortalClient } from "../../auth/portal/account_deps.ts";
import { HttpError } from "../errors.ts";
import type { HandlerContext } from "../request_context.ts";
import { type Caller, createRouteTable, isRouteMatch, methodNotAllowed } from "../route_table.ts";
import { loadPortalAssets } from "./portal_assets.ts";
import {
  checkOrigin,
  PORTAL_API,
  type PortalCall,
  type PortalDeps,
  type PortalRoute,
  type PortalRouteDeps,
  requireSession,
} from "./portal_request.ts";
import { createOwnAccountRoutes } from "./routes/own_account.ts";
import { createOwnKeyRoutes } from "./routes/own_keys.ts";
import { createOwnTokenRoutes } from "./routes/own_tokens.ts";
import { createPageRoutes } from "./routes/pages.ts";
import { createSessionRoutes } from "./routes/session.ts";
import { createSignUpRoutes } from "./routes/sign_up.ts";

export { PORTAL_API, type PortalDeps, SESSION_COOKIE } from "./portal_request.ts";

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

/** Whether a request's raw path is the portal's. */
export function isPortalPath(rawPath: string): boolean {
  return rawPath === "/portal" || rawPath.startsWith("/portal/") ||
    rawPath.startsWith(`${PORTAL_API}/`);
}

function toRouteDeps(deps: PortalDeps): PortalRouteDeps {
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
  return { deps, accountDeps, mailed };
}

/** The portal's route table's rows: its pages and its API. */
export function createPortalRoutes(deps: PortalDeps): PortalRoute[] {
  const routeDeps = toRouteDeps(deps);
  return [
    ...createPageRoutes(deps.assets ?? loadPortalAssets()),
    ...createSignUpRoutes(routeDeps),
    ...createSessionRoutes(routeDeps),
    ...createOwnKeyRoutes(routeDeps),
    ...createOwnTokenRoutes(routeDeps),
    ...createOwnAccountRoutes(routeDeps),
  ];
}

const PORTAL_CALLERS: ReadonlySet<Caller> = new Set(["anyone", "session", "session+csrf"]);

/** Creates the portal's handler. */
export function createPortalHandler(deps: PortalDeps) {
  const routes = createPortalRoutes(deps);
  for (const route of routes) {
    if (!PORTAL_CALLERS.has(route.caller)) {
      throw new TypeError(`Route ${route.method} ${route.path} is for ${route.caller} callers`);
    }
  }
  const table = createRouteTable(routes, { headAsGet: true });
  const origin = deps.origin;

  /**
   * The call, after who called is checked from the route's caller, before its handler runs:
   * for `session+csrf` the Origin first (a cross-origin change learns nothing of the session),
   * then the session and its CSRF token; for `session` the session. The signed-in user and
   * session go in the call.
   */
  async function toCall(
    request: Request,
    found: { route: PortalRoute; params: Record<string, string>; context: HandlerContext },
  ): Promise<PortalCall> {
    const client: PortalClient = {
      address: found.context.clientAddress,
      links: { origin },
      signal: request.signal,
    };
    const call: PortalCall = { context: found.context, params: found.params, client, origin };
    if (found.route.caller === "anyone") return call;
    const change = found.route.caller === "session+csrf";
    if (change) checkOrigin(request, call);
    return { ...call, session: await requireSession(deps, request, change) };
  }

  /** Answers a request whose raw path {@link isPortalPath} accepted. */
  return async function handlePortal(request: Request, context: HandlerContext): Promise<Response> {
    const path = context.rawPath.replace(/\/+$/, "") || "/";
    const found = table.match(request.method, path);
    if (found === undefined) throw new HttpError(404, "not_found", "No such page or endpoint");
    if (!isRouteMatch(found)) throw methodNotAllowed(request.method, found);
    const call = await toCall(request, { ...found, context });
    const response = await found.route.handle(request, call);
    for (const [name, value] of PORTAL_SECURITY_HEADERS) response.headers.set(name, value);
    return response;
  };
}
