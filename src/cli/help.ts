/**
 * The admin CLI's help, generated from the command tables: the whole list,
 * a group's subcommands, or one command with its arguments and options.
 *
 * @module
 */
import { formatColumns, wrapWords } from "../config/help.ts";
import type { Command, CommandOption } from "./command.ts";
import type { CommandGroup } from "./commands.ts";
import { GROUPS } from "./commands.ts";

/** How the CLI is invoked, in usage lines. */
export const PROGRAM = "deno task admin";

/** Options every command takes. */
export const GLOBAL_OPTIONS: readonly CommandOption[] = [
  {
    name: "db",
    kind: "value",
    placeholder: "PATH",
    description: "SQLite database (env KEYGATE_DB; default db/keygate.sqlite3)",
  },
  {
    name: "store",
    kind: "value",
    placeholder: "URL",
    description: "The store instead: postgres://USER@HOST/DB or sqlite:PATH " +
      "(env KEYGATE_STORE; docs/postgres.md)",
  },
  {
    name: "log",
    kind: "boolean",
    description: "Also write each change as one JSON line on standard error (for a log " +
      "collector); every change is in the audit log either way",
  },
  { name: "help", kind: "boolean", description: "Show help" },
  { name: "version", kind: "boolean", description: "Print the version" },
];

const COLUMN = 34;

/** The full help: every group and command. */
export function formatOverview(): string {
  return [
    "keygate admin: manage users, API keys and tokens",
    "",
    `Usage: ${PROGRAM} COMMAND [ARGUMENTS] [OPTIONS]`,
    "",
    ...GROUPS.flatMap((group) => [`${group.title}:`, ...group.commands.map(formatLine), ""]),
    "Global options:",
    ...GLOBAL_OPTIONS.map(formatOption),
    "",
    `Run "${PROGRAM} help COMMAND" (or COMMAND --help) for its arguments and options.`,
    ...FOOTER,
  ].join("\n");
}

/** A group's subcommands, for `admin user` and `admin user --help`. */
export function formatGroup(group: CommandGroup): string {
  return [
    `${PROGRAM} ${group.name}: ${group.title.toLowerCase()}`,
    "",
    `Usage: ${PROGRAM} ${group.name} COMMAND [ARGUMENTS] [OPTIONS]`,
    "",
    "Commands:",
    ...group.commands.map(formatLine),
    "",
    `Run "${PROGRAM} help ${group.name} COMMAND" for its arguments and options.`,
  ].join("\n");
}

/** One command's help: usage, description, arguments, options. */
export function formatCommand(command: Command): string {
  const lines = [`Usage: ${formatUsage(command)}`, "", command.summary];
  if (command.description) lines.push("", ...wrapWords(command.description, 96));
  if (command.arguments.length > 0) {
    lines.push("", "Arguments:");
    for (const arg of command.arguments) {
      lines.push(row(`  ${arg.name}${arg.optional ? " (optional)" : ""}`, arg.description));
    }
  }
  if (command.readsPassword) {
    lines.push("", "The password is read from standard input, never from an argument.");
  }
  if (command.options.length > 0) {
    lines.push("", "Options:", ...command.options.map(formatOption));
  }
  lines.push("", "Global options:", ...GLOBAL_OPTIONS.map(formatOption), ...FOOTER);
  return lines.join("\n");
}

/** `deno task admin key rotate KEY [--grace DURATION]`. */
export function formatUsage(command: Command): string {
  const args = command.arguments.map((a) => a.optional ? `[${a.name}]` : a.name);
  const options = command.options.map((o) =>
    o.kind === "boolean" ? `[--${o.name}]` : `[--${o.name} ${o.placeholder}]`
  );
  return [PROGRAM, ...command.words, ...args, ...options].join(" ");
}

const FOOTER = [
  "",
  "DURATION is a whole number and a unit: 90s, 15m, 10h, 7d.",
  "TIME is an ISO 8601 time (2026-05-01T12:00:00Z), milliseconds since the epoch,",
  "or a DURATION meaning that long ago (24h).",
  "Exit codes: 0 done, 1 failed (nothing found, refused), 2 usage error.",
  "",
];

function formatLine(command: Command): string {
  const args = command.arguments.map((a) => a.optional ? `[${a.name}]` : a.name);
  return row(`  ${[...command.words, ...args].join(" ")}`, command.summary);
}

function formatOption(option: CommandOption): string {
  const name = option.name === "help" ? "-h, --help" : `--${option.name}`;
  return row(
    `  ${name}${option.placeholder ? ` ${option.placeholder}` : ""}`,
    option.description,
  );
}

function row(left: string, text: string): string {
  return formatColumns(left, text, COLUMN);
}
