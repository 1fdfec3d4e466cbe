/**
 * The signed-in user's own account: change the password, change the e-mail (a code to the
 * new address, then confirm), delete the account.
 *
 * @module
 */
import {
  changeOwnPassword,
  confirmEmailChange,
  deleteOwnAccount,
  requestEmailChange,
} from "../../../auth/portal/own_account.ts";
import { requiredString, toJson } from "../../admin/admin_json.ts";
import {
  ACCEPTED,
  type PortalRoute,
  type PortalRouteDeps,
  readChangeBody,
  sessionRoute,
  toApiPath,
  toSessionCookie,
} from "../portal_request.ts";

/** `POST /password`, `/email`, `/email/confirm` and `/account/delete`. */
export function createOwnAccountRoutes({ deps, mailed }: PortalRouteDeps): PortalRoute[] {
  return [
    sessionRoute({
      method: "POST",
      path: toApiPath("/password"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user, sessionId } = call.session;
        const body = await readChangeBody(request, ["current_password", "password"]);
        const ended = await changeOwnPassword(deps, call.client, user, {
          current: body.current_password,
          password: body.password,
          sessionId,
        });
        mailed();
        return toJson({ status: "password_changed", tokens_revoked: ended });
      },
    }),
    sessionRoute({
      method: "POST",
      path: toApiPath("/email"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user } = call.session;
        const body = await readChangeBody(request, ["email", "password"]);
        await requestEmailChange(deps, call.client, user, {
          email: requiredString(body, "email", 254),
          password: body.password,
        });
        mailed();
        return toJson(ACCEPTED, 202);
      },
    }),
    sessionRoute({
      method: "POST",
      path: toApiPath("/email/confirm"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user } = call.session;
        const body = await readChangeBody(request, ["code"]);
        const email = await confirmEmailChange(deps, call.client, user, {
          code: requiredString(body, "code", 64),
        });
        mailed();
        return toJson({ status: "email_changed", email });
      },
    }),
    sessionRoute({
      method: "POST",
      path: toApiPath("/account/delete"),
      caller: "session+csrf",
      async handle(request, call) {
        const { user } = call.session;
        const body = await readChangeBody(request, ["password"]);
        const deleted = await deleteOwnAccount(deps, call.client, user, {
          password: body.password,
        });
        const response = toJson({
          status: "deleted",
          api_keys_deleted: deleted.apiKeys,
          tokens_deleted: deleted.tokens,
        });
        response.headers.set("set-cookie", toSessionCookie("", 0));
        return response;
      },
    }),
  ];
}
