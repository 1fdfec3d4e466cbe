/**
 * How every deletion of a user names it in the audit log (src/store/audit_anonymize.ts): an
 * operator's (`deleteUser`), the janitor's of a sign-up never verified, the user's own and a
 * refused sign-up's (src/auth/portal/). Each passes the store a fresh opaque id, which the
 * user's earlier audit rows take instead of its e-mail in the deletion's transaction, and the
 * actor of the user's own portal changes.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import type { AuditAnonymizing } from "../store/store.ts";
import { toPortalActor } from "./portal/account_deps.ts";

/** The audit log's name for a deleted user: random, so nothing leads back to the e-mail. */
export function generateDeletedRef(): string {
  return `user:deleted:${randomBytes(12).toString("base64url")}`;
}

/** What a deletion of user `userId` passes the store: a fresh id, and the user's actor. */
export function toAnonymizing(userId: number): AuditAnonymizing {
  return { anonymousRef: generateDeletedRef(), anonymousActor: toPortalActor({ id: userId }) };
}
