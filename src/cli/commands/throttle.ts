/**
 * `admin throttle …`: see and clear failed-login counters.
 *
 * @module
 */
import { toUserRef } from "../../audit.ts";
import { toAccountSubject, toClientSubject } from "../../throttle.ts";
import type { Command } from "../command.ts";
import { printRows } from "../output.ts";
import { findUser } from "../values.ts";

/** The `throttle` commands. */
export const THROTTLE_COMMANDS: readonly Command[] = [
  {
    words: ["throttle", "list"],
    summary: "List live failed-login counters",
    arguments: [],
    options: [{ name: "json", kind: "boolean", description: "Print JSON instead of a table" }],
    database: "existing",
    run({ store, options, io }) {
      const now = io.clock.now();
      const keys = new Map(store.listApiKeys().map((key) => [`key:${key.id}`, key]));
      const rows = store.listLoginFailures(now).map((row) => {
        const key = keys.get(row.subject);
        return {
          subject: key ? `key ${key.id} (${key.prefix}…, ${key.email})` : row.subject,
          failures: row.failures,
          blocked_for: row.blockedUntil > now
            ? `${Math.ceil((row.blockedUntil - now) / 1000)}s`
            : "-",
          last_failure_at: new Date(row.lastFailureAt).toISOString(),
        };
      });
      printRows(io, rows, options.json !== undefined);
    },
  },
  {
    words: ["throttle", "clear"],
    summary: "Forget the counters of a user's API keys, or of a client address",
    arguments: [{
      name: "TARGET",
      description: "A user's e-mail, or a client address (IPv6: its /64)",
    }],
    options: [],
    database: "existing",
    run({ store, args, io, audit }) {
      const target = args.TARGET!;
      if (target.includes("@")) {
        const user = findUser(store, target);
        const cleared = store.transaction(() => {
          const n = store.listApiKeys(user.id)
            .filter((key) => store.clearLoginFailures(toAccountSubject(key.id))).length;
          audit("throttle.cleared", toUserRef(user.email), { counters: n });
          return n;
        });
        io.stdout(`Cleared the failed-login counters of ${cleared} API key(s) of ${user.email}`);
        return;
      }
      const subject = toClientSubject(target);
      const cleared = store.transaction(() => {
        const found = store.clearLoginFailures(subject);
        audit("throttle.cleared", subject, { counters: found ? 1 : 0 });
        return found;
      });
      io.stdout(
        cleared
          ? `Cleared the failed-login counter of ${subject.slice("client:".length)}`
          : `No failed-login counter for ${subject.slice("client:".length)}`,
      );
    },
  },
];
