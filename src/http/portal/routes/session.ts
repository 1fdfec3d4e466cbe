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
  readChangeBody,
  sessionRoute,
  toApiPath,
  toSessionCookie,
} from "../portal_request.ts";

/** `GET /session` and `POST /signout`. */
export function createSessionRoutes({ deps }: PortalRouteDeps): PortalRoute[] {
  return [
    sessionRoute({
      method: "GET",
      path: toApiPath("/session"),
      caller: "session",
      handle(_request, call) {
        const { user, sessionId } = call.session;
        return toJson({ email: user.email, csrf_token: toCsrfToken(sessionId) });
      },
    }),
    sessionRoute({
      method: "POST",
      path: toApiPath("/signout"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user, sessionId } = call.session;
        await readChangeBody(request, []);
        await signOut(deps, user, sessionId);
        return new Response(null, {
          status: 204,
          headers: { "set-cookie": toSessionCookie("", 0) },
        });
      },
    }),
  ];
}
