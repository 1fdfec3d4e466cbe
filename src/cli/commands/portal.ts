/**
 * `admin portal …`: the developer portal's operator tasks (docs/portal.md).
 *
 * @module
 */
import { approveAccount } from "../../auth/portal/accounts.ts";
import { enrolUser } from "../../auth/portal/enrolment.ts";
import { findUserOrFail } from "../../auth/users.ts";
import type { Command } from "../command.ts";

/** The `portal` commands. */
export const PORTAL_COMMANDS: readonly Command[] = [
  {
    words: ["portal", "approve"],
    summary: "Approve a portal account that waits for an operator (--portal-mode approval); " +
      "its user is mailed",
    arguments: [{ name: "EMAIL", description: "The account's e-mail address" }],
    options: [{
      name: "origin",
      kind: "value",
      description: "The portal's public origin for the mail's link (default: " +
        "KEYGATE_PORTAL_ORIGIN, else https://localhost:8443)",
    }],
    database: "existing",
    async run({ args, options, io, changes, store }) {
      const user = await findUserOrFail(store, args.EMAIL!);
      const origin = (options.origin as string | undefined) ?? io.env.KEYGATE_PORTAL_ORIGIN ??
        "https://localhost:8443";
      await approveAccount(changes, user, { origin });
      io.stdout(`Approved ${user.email}; the approval mail is queued`);
    },
  },
  {
    words: ["portal", "enrol"],
    summary: "Let a user an operator added sign in to the portal and reset its password there " +
      "(needed with --portal-existing-users off, the default)",
    arguments: [{ name: "EMAIL", description: "The user's e-mail address" }],
    options: [],
    database: "existing",
    async run({ args, io, changes, store }) {
      const user = await findUserOrFail(store, args.EMAIL!);
      await enrolUser(changes, user);
      io.stdout(`Enrolled ${user.email} in the portal`);
    },
  },
];
