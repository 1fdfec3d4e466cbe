/**
 * `admin throttle …`: see and clear failed-login counters.
 *
 * @module
 */
import { clearThrottle, listAllThrottleCounters } from "../../auth/admin_tasks.ts";
import type { Command } from "../command.ts";
import { printRows } from "../output.ts";

/** The `throttle` commands. */
export const THROTTLE_COMMANDS: readonly Command[] = [
  {
    words: ["throttle", "list"],
    summary: "List live failed-login counters",
    arguments: [],
    options: [{ name: "json", kind: "boolean", description: "Print JSON instead of a table" }],
    database: "existing",
    async run({ store, options, io }) {
      const now = io.clock.now();
      const rows = (await listAllThrottleCounters(store, now)).map((row) => {
        const key = row.key;
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
    summary: "Forget the counters of a user's API keys, of a client address, or one counter",
    arguments: [{
      name: "TARGET",
      description: "A user's e-mail, a client address (IPv6: its /64; its login and operator " +
        "counters), or a subject as throttle list shows it (client:ADDRESS, admin:ADDRESS)",
    }],
    options: [],
    database: "existing",
    async run({ args, io, changes }) {
      const { cleared, target } = await clearThrottle(changes, args.TARGET!);
      io.stdout(
        cleared > 0
          ? `Cleared ${cleared} failed-login counter(s) of ${target}`
          : `No failed-login counter for ${target}`,
      );
    },
  },
];
