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
import { createRouteTable, isRouteMatch, methodNotAllowed } from "../route_table.ts";
import { loadPortalAssets } from "./portal_assets.ts";
import { PORTAL_API, type PortalDeps, type PortalRouteDeps } from "./portal_request.ts";
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

/** Creates the portal's handler. */
export function createPortalHandler(deps: PortalDeps) {
  const routeDeps = toRouteDeps(deps);
  const table = createRouteTable([
    ...createPageRoutes(deps.assets ?? loadPortalAssets()),
    ...createSignUpRoutes(routeDeps),
    ...createSessionRoutes(routeDeps),
    ...createOwnKeyRoutes(routeDeps),
    ...createOwnTokenRoutes(routeDeps),
    ...createOwnAccountRoutes(routeDeps),
  ], { headAsGet: true });

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
