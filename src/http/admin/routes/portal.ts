/**
 * `/admin/v1/portal/pending…`: the developer portal's accounts that wait for an operator
 * (`--portal-mode approval`), and approving or refusing one. Approving calls `approveAccount`,
 * as `deno task admin portal approve` does; refusing deletes the waiting account
 * (src/auth/portal/approval.ts).
 *
 * @module
 */
import { approveAccount } from "../../../auth/portal/accounts.ts";
import { listPendingAccounts, refuseAccount } from "../../../auth/portal/approval.ts";
import { AuthError } from "../../../auth/errors.ts";
import type { AdminContext, AdminRoute } from "../admin_router.ts";
import { toJson, toLimit } from "../admin_json.ts";
import { readCursor, toPage } from "../cursor.ts";
import { toPendingAccountView } from "../views.ts";
import { findUserParam } from "./users.ts";

/** The portal's origin for the approval mail's link. @throws {AuthError} with the portal off. */
function toPortalLinks(context: AdminContext): { origin: string } {
  const origin = context.deps.portalOrigin;
  if (origin === undefined) {
    throw new AuthError(
      "conflict",
      "Cannot approve: the portal is off on this server (start it with --portal)",
    );
  }
  return { origin };
}

export const PORTAL_ROUTES: readonly AdminRoute[] = [
  {
    method: "GET",
    path: "/admin/v1/portal/pending",
    caller: "operator",
    async handle(_request, { deps, url }) {
      const limit = toLimit(url);
      const cursor = readCursor(url, ["number", "number"]);
      const all = await listPendingAccounts(deps.store);
      const after = cursor === undefined
        ? all
        : all.filter(({ signedUpAt, user }) =>
          signedUpAt > (cursor[0] as number) ||
          (signedUpAt === cursor[0] && user.id > (cursor[1] as number))
        );
      const page = toPage(after, limit, (row) => [row.signedUpAt, row.user.id]);
      return toJson({ accounts: page.rows.map(toPendingAccountView), next: page.next });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/portal/pending/:id/approve",
    caller: "writer",
    async handle(_request, context) {
      const user = await findUserParam(context);
      await approveAccount(context.changes, user, toPortalLinks(context));
      return toJson({ id: user.id, status: "approved" });
    },
  },
  {
    method: "POST",
    path: "/admin/v1/portal/pending/:id/refuse",
    caller: "writer",
    async handle(_request, context) {
      const user = await findUserParam(context);
      await refuseAccount(context.changes, user);
      return toJson({ id: user.id, status: "refused" });
    },
  },
];
