/**
 * `admin throttle …`: see and clear failed-login counters.
 *
 * @module
 */
import { toUserRef } from "../../auth/audit.ts";
import { type ChangeDeps, toAuditEntry } from "../../auth/changes.ts";
import { toAccountSubject, toClientSubject } from "../../auth/throttle.ts";
import type { Store } from "../../store/store.ts";
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
    async run({ store, options, io }) {
      const now = io.clock.now();
      const keys = new Map((await store.listApiKeys()).map((key) => [`key:${key.id}`, key]));
      const rows = (await store.listLoginFailures(now)).map((row) => {
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
    async run({ store, args, io, changes }) {
      const target = args.TARGET!;
      if (target.includes("@")) {
        const user = await findUser(store, target);
        const subjects = (await store.listApiKeys(user.id)).map((key) => toAccountSubject(key.id));
        const cleared = await clearCounters(store, changes, subjects, toUserRef(user.email));
        io.stdout(`Cleared the failed-login counters of ${cleared} API key(s) of ${user.email}`);
        return;
      }
      const subject = toClientSubject(target);
      const cleared = await clearCounters(store, changes, [subject], subject);
      io.stdout(
        cleared > 0
          ? `Cleared the failed-login counter of ${subject.slice("client:".length)}`
          : `No failed-login counter for ${subject.slice("client:".length)}`,
      );
    },
  },
];

/** Forgets counters, audited as `throttle.cleared` on `auditSubject`; resolves to how many. */
async function clearCounters(
  store: Store,
  changes: ChangeDeps,
  subjects: string[],
  auditSubject: string,
): Promise<number> {
  let entry;
  const cleared = await store.clearLoginFailures(subjects, {
    now: changes.clock.now(),
    audit: (n) => entry = toAuditEntry(changes, "throttle.cleared", auditSubject, { counters: n }),
  });
  if (entry !== undefined) changes.noteChange?.(entry);
  return cleared;
}
