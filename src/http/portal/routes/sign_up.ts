/**
 * The portal's routes before a session: sign up, verify the e-mail, sign in, forgot the
 * password and reset it. Sign-up and forgot-password answer the same whoever the address is.
 *
 * @module
 */
import { signUp, verifyEmail } from "../../../auth/portal/accounts.ts";
import { requestPasswordReset, resetPassword } from "../../../auth/portal/password_reset.ts";
import { signIn } from "../../../auth/portal/sessions.ts";
import { toCsrfToken } from "../../../auth/portal/codes.ts";
import { requiredString, toJson } from "../../admin/admin_json.ts";
import {
  ACCEPTED,
  type PortalRoute,
  type PortalRouteDeps,
  readChange,
  toApiPath,
  toSessionCookie,
} from "../portal_request.ts";

/** `POST /signup`, `/verify`, `/signin`, `/forgot` and `/reset`. */
export function createSignUpRoutes(
  { deps, accountDeps, mailed }: PortalRouteDeps,
): PortalRoute[] {
  return [
    {
      method: "POST",
      path: toApiPath("/signup"),
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
      path: toApiPath("/verify"),
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
        response.headers.set("set-cookie", toSessionCookie(sessionId, seconds));
        return response;
      },
    },
    {
      method: "POST",
      path: toApiPath("/signin"),
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
        response.headers.set("set-cookie", toSessionCookie(session.sessionId, seconds));
        return response;
      },
    },
    {
      method: "POST",
      path: toApiPath("/forgot"),
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
      path: toApiPath("/reset"),
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
  ];
}
