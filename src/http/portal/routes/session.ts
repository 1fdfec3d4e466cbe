/**
 * The portal's session routes: who is signed in (with the CSRF token the page sends back on
 * every change), and sign-out.
 *
 * @module
 */
import { signOut } from "../../../auth/portal/sessions.ts";
import { toCsrfToken } from "../../../auth/portal/codes.ts";
import { toJson } from "../../admin/admin_json.ts";
import {
  type PortalRoute,
  type PortalRouteDeps,
  readChange,
  requireSession,
  toApiPath,
  toSessionCookie,
} from "../portal_request.ts";

/** `GET /session` and `POST /signout`. */
export function createSessionRoutes({ deps }: PortalRouteDeps): PortalRoute[] {
  return [
    {
      method: "GET",
      path: toApiPath("/session"),
      caller: "anyone",
      async handle(request) {
        const { user, sessionId } = await requireSession(deps, request, false);
        return toJson({ email: user.email, csrf_token: toCsrfToken(sessionId) });
      },
    },
    {
      method: "POST",
      path: toApiPath("/signout"),
      caller: "anyone",
      async handle(request, call) {
        await readChange(request, call, []);
        const { user, sessionId } = await requireSession(deps, request, true);
        await signOut(deps, user, sessionId);
        return new Response(null, {
          status: 204,
          headers: { "set-cookie": toSessionCookie("", 0) },
        });
      },
    },
  ];
}
