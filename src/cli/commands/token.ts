/**
 * `admin token …`: list a user's tokens (never the tokens themselves),
 * revoke them all, purge dead rows.
 *
 * @module
 */
import { purgeEndedTokens } from "../../auth/admin_tasks.ts";
import { listUserTokens, revokeUserTokens } from "../../auth/users.ts";
import type { Command } from "../command.ts";
import { AdminError } from "../io.ts";
import { printRows, toIso, toIsoOrNull } from "../output.ts";
import { findUser, toTime } from "../values.ts";

/** The `token` commands. */
export const TOKEN_COMMANDS: readonly Command[] = [
  {
    words: ["token", "list"],
    summary: "List a user's tokens: ids, keys, times and state, never the tokens",
    arguments: [{ name: "EMAIL", description: "The user's e-mail address" }],
    options: [
      { name: "live", kind: "boolean", description: "Only tokens that still work" },
      { name: "json", kind: "boolean", description: "Print JSON instead of a table" },
    ],
    database: "existing",
    async run({ store, args, options, io }) {
      const user = await findUser(store, args.EMAIL!);
      const rows = (await listUserTokens(store, user, io.clock.now()))
        .filter((token) => options.live === undefined || token.state === "live")
        .map((token) => ({
          id: token.id,
          api_key: token.apiKeyId,
          issued_at: toIso(token.issuedAt),
          expires_at: toIso(token.expiresAt),
          status: token.state,
          revoked_at: toIsoOrNull(token.revokedAt),
        }));
      printRows(io, rows, options.json !== undefined);
    },
  },
  {
    words: ["token", "revoke-all"],
    summary: "Invalidate every token of a user issued before a time, in one write",
    arguments: [{ name: "EMAIL", description: "The user's e-mail address" }],
    options: [{
      name: "before",
      kind: "value",
      placeholder: "TIME",
      description: "Only tokens issued before TIME (default: now)",
    }],
    database: "existing",
    async run({ store, args, options, io, changes }) {
      const user = await findUser(store, args.EMAIL!);
      const now = io.clock.now();
      const before = options.before === undefined
        ? undefined
        : toTime(options.before, now, "--before");
      if (before !== undefined && before > now) {
        throw new AdminError(`Invalid --before "${options.before}": it is in the future`, 2);
      }
      const revoked = await revokeUserTokens(changes, user, before);
      const when = before === undefined ? "until now" : `before ${toIso(before)}`;
      io.stdout(`Revoked ${revoked} live token(s) of ${user.email} (issued ${when})`);
    },
  },
  {
    words: ["token", "purge"],
    summary: "Delete expired and revoked token rows now (the server's janitor also does)",
    arguments: [],
    options: [],
    database: "existing",
    async run({ io, changes }) {
      const deleted = await purgeEndedTokens(changes);
      io.stdout(`Deleted ${deleted} expired or revoked token row(s)`);
    },
  },
];
