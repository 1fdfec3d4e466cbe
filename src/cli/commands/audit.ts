/**
 * `admin audit`: print the audit log.
 *
 * @module
 */
import type { Command } from "../command.ts";
import { printRows, toIso } from "../output.ts";
import { toTime } from "../values.ts";

/** The `audit` command. */
export const AUDIT_COMMANDS: readonly Command[] = [
  {
    words: ["audit"],
    summary: "Print the audit log (admin changes, security events)",
    arguments: [],
    options: [
      {
        name: "since",
        kind: "value",
        placeholder: "TIME",
        description: "Only entries at or after TIME",
      },
      { name: "json", kind: "boolean", description: "Print JSON instead of a table" },
    ],
    database: "existing",
    async run({ store, options, io }) {
      const since = options.since === undefined
        ? 0
        : toTime(options.since, io.clock.now(), "--since");
      const rows = await store.listAudit(since);
      if (options.json !== undefined) {
        io.stdout(JSON.stringify(rows.map((row) => ({ ...row, at: toIso(row.at) })), null, 2));
        return;
      }
      printRows(
        io,
        rows.map((row) => ({
          at: toIso(row.at),
          actor: row.actor,
          action: row.action,
          subject: row.subject,
          detail: JSON.stringify(row.detail),
        })),
      );
    },
  },
];
