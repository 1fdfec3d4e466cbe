/**
 * Every admin command, grouped as help lists them.
 *
 * @module
 */
import type { Command } from "./command.ts";
import { AUDIT_COMMANDS } from "./commands/audit.ts";
import { DB_COMMANDS } from "./commands/db.ts";
import { KEY_COMMANDS } from "./commands/key.ts";
import { LIMIT_COMMANDS } from "./commands/limit.ts";
import { OPERATOR_COMMANDS } from "./commands/operator.ts";
import { PORTAL_COMMANDS } from "./commands/portal.ts";
import { THROTTLE_COMMANDS } from "./commands/throttle.ts";
import { TOKEN_COMMANDS } from "./commands/token.ts";
import { USER_COMMANDS } from "./commands/user.ts";

/** A group of commands with a heading for help. */
export interface CommandGroup {
  name: string;
  title: string;
  commands: readonly Command[];
}

/** The groups in help order. */
export const GROUPS: readonly CommandGroup[] = [
  { name: "user", title: "Users", commands: USER_COMMANDS },
  { name: "key", title: "API keys", commands: KEY_COMMANDS },
  { name: "token", title: "Tokens", commands: TOKEN_COMMANDS },
  { name: "limit", title: "Rates and quotas", commands: LIMIT_COMMANDS },
  { name: "throttle", title: "Login throttle", commands: THROTTLE_COMMANDS },
  { name: "audit", title: "Audit", commands: AUDIT_COMMANDS },
  { name: "operator", title: "Operators of the admin API", commands: OPERATOR_COMMANDS },
  { name: "portal", title: "Developer portal", commands: PORTAL_COMMANDS },
  { name: "db", title: "Database", commands: DB_COMMANDS },
];

/** Every command. */
export const COMMANDS: readonly Command[] = GROUPS.flatMap((group) => group.commands);
