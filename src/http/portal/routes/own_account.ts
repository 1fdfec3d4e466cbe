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
  readChange,
  requireSession,
  toApiPath,
  toSessionCookie,
} from "../portal_request.ts";

/** `POST /password`, `/email`, `/email/confirm` and `/account/delete`. */
export function createOwnAccountRoutes({ deps, mailed }: PortalRouteDeps): PortalRoute[] {
  return [
    {
      method: "POST",
      path: toApiPath("/password"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["current_password", "password"]);
        const { user, sessionId } = await requireSession(deps, request, true);
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
      path: toApiPath("/email"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["email", "password"]);
        const { user } = await requireSession(deps, request, true);
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
      path: toApiPath("/email/confirm"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["code"]);
        const { user } = await requireSession(deps, request, true);
        const email = await confirmEmailChange(deps, call.client, user, {
          code: requiredString(body, "code", 64),
        });
        mailed();
        return toJson({ status: "email_changed", email });
      },
    },
    {
      method: "POST",
      path: toApiPath("/account/delete"),
      caller: "anyone",
      async handle(request, call) {
        const body = await readChange(request, call, ["password"]);
        const { user } = await requireSession(deps, request, true);
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
    },
  ];
}
