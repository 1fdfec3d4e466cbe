/**
 * `admin operator …`: operators of the admin API and web console (--admin on).
 * An operator's token is printed once, alone on the last line; keygate keeps
 * only its SHA-256 digest.
 *
 * @module
 */
import { createOperator, revokeOperator, toOperatorRole } from "../../auth/operators.ts";
import type { Command } from "../command.ts";
import { AdminError } from "../io.ts";
import { printRows, toIso, toIsoOrNull } from "../output.ts";

const NAME = {
  name: "NAME",
  description:
    "1 to 64 letters, digits, '.', '_', '-' or '@'; the audit log's actor is operator:NAME",
};

/** The `operator` commands. */
export const OPERATOR_COMMANDS: readonly Command[] = [
  {
    words: ["operator", "create"],
    summary:
      "Create an operator of the admin API; its token is printed once, alone on the last line",
    arguments: [NAME],
    options: [{
      name: "role",
      kind: "value",
      placeholder: "read|write",
      description: "read: may only look; write: may also change (required)",
    }],
    database: "existing",
    async run({ args, options, io, changes }) {
      if (options.role === undefined) {
        throw new AdminError(
          "Missing --role read|write (usage: operator create NAME --role read|write)",
          2,
        );
      }
      const { operator, token } = await createOperator(
        changes,
        args.NAME!,
        toOperatorRole(options.role),
      );
      io.stdout(
        `Created operator ${operator.name} (role ${operator.role}). Its token is shown only this once:`,
      );
      io.stdout(token);
    },
  },
  {
    words: ["operator", "list"],
    summary: "List operators (never their tokens)",
    arguments: [],
    options: [{ name: "json", kind: "boolean", description: "Print JSON instead of a table" }],
    database: "existing",
    async run({ store, options, io }) {
      const rows = (await store.listOperators()).map((op) => ({
        name: op.name,
        role: op.role,
        token: `${op.prefix}…`,
        status: op.revokedAt === null ? "active" : "revoked",
        created_at: toIso(op.createdAt),
        revoked_at: toIsoOrNull(op.revokedAt),
      }));
      printRows(io, rows, options.json !== undefined);
    },
  },
  {
    words: ["operator", "revoke"],
    summary: "Revoke an operator's token",
    arguments: [NAME],
    options: [],
    database: "existing",
    async run({ args, io, changes }) {
      const operator = await revokeOperator(changes, args.NAME!);
      io.stdout(`Revoked operator ${operator.name}`);
    },
  },
];
