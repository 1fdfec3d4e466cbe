/**
 * `admin token …`: list a user's tokens (never the tokens themselves),
 * revoke them all, purge dead rows.
 *
 * @module
 */
import { toUserRef } from "../../audit.ts";
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
    run({ store, args, options, io }) {
      const user = findUser(store, args.EMAIL!);
      const now = io.clock.now();
      const cutoff = user.tokensValidFrom;
      const rows = store.listTokensOfUser(user.id).map((token) => ({
        id: token.id,
        api_key: token.apiKeyId,
        issued_at: toIso(token.issuedAt),
        expires_at: toIso(token.expiresAt),
        status: token.revokedAt !== null || token.issuedAt < cutoff
          ? "revoked"
          : token.expiresAt <= now
          ? "expired"
          : user.disabled
          ? "user disabled"
          : "live",
        revoked_at: toIsoOrNull(token.revokedAt),
      })).filter((row) => options.live === undefined || row.status === "live");
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
    run({ store, args, options, io, audit }) {
      const user = findUser(store, args.EMAIL!);
      const now = io.clock.now();
      const before = options.before === undefined
        ? undefined
        : toTime(options.before, now, "--before");
      if (before !== undefined && before > now) {
        throw new AdminError(`Invalid --before "${options.before}": it is in the future`, 2);
      }
      const revoked = store.transaction(() => {
        const n = before === undefined
          ? store.revokeTokensOfUser(user.id, now)
          : store.revokeTokensIssuedBefore(user.id, before, now);
        audit("tokens.revoked", toUserRef(user.email), {
          before: toIso(before ?? now),
          tokens_revoked: n,
        });
        return n;
      });
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
    run({ store, io, audit }) {
      const deleted = store.transaction(() => {
        const n = store.purgeTokens(io.clock.now());
        audit("tokens.purged", "tokens", { deleted: n });
        return n;
      });
      io.stdout(`Deleted ${deleted} expired or revoked token row(s)`);
    },
  },
];
