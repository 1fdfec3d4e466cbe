/**
 * The admin CLI's command line: which command the words name, its options
 * (only those it takes) and its positionals by name. `help`, `--help`/`-h`,
 * `--version` and a bare group answer with text to print instead.
 *
 * @module
 */
import { type OptionSpec, parseArguments } from "../config/args.ts";
import { parseBoolean } from "../config/parsers.ts";
import { VERSION } from "../config/version.ts";
import { redactCredentials } from "../store/store_url.ts";
import type { Command } from "./command.ts";
import { COMMANDS, GROUPS } from "./commands.ts";
import {
  formatCommand,
  formatGroup,
  formatOverview,
  formatUsage,
  GLOBAL_OPTIONS,
  PROGRAM,
} from "./help.ts";
import { AdminError } from "./io.ts";

const PASSWORD_ARGUMENT = "passwords are read from standard input, never from arguments " +
  "(they would stay in shell history)";

/** Every option any command takes, for the first pass that finds the command words. */
const ALL_OPTIONS: readonly OptionSpec[] = (() => {
  const specs = new Map<string, OptionSpec>();
  for (const option of [...GLOBAL_OPTIONS, ...COMMANDS.flatMap((c) => c.options)]) {
    const spec: OptionSpec = {
      name: option.name,
      kind: option.kind,
      ...(option.name === "help" ? { short: "h" } : {}),
    };
    const known = specs.get(option.name);
    if (known !== undefined && known.kind !== spec.kind) {
      throw new Error(`Option --${option.name} is a value in one command and a flag in another`);
    }
    specs.set(option.name, spec);
  }
  return [...specs.values()];
})();

/** A command to run, or text to print instead (help, version). */
export type CommandLine =
  | { kind: "print"; text: string }
  | {
    kind: "run";
    command: Command;
    /** The options as given, and as the command takes them (booleans given as `=off` absent). */
    values: Record<string, string>;
    options: Record<string, string | undefined>;
    args: Record<string, string | undefined>;
  };

/**
 * Reads the command line.
 *
 * @throws {AdminError} exit 2 for an unknown command or option, a missing or extra argument.
 */
export function parseCommandLine(args: string[]): CommandLine {
  let parsed;
  try {
    parsed = parseArguments(args, ALL_OPTIONS, { positionals: true });
  } catch (error) {
    throw new AdminError(`${(error as Error).message} (see ${PROGRAM} help)`, 2);
  }
  const { values, positionals } = parsed;
  if (values.version !== undefined) return { kind: "print", text: `keygate ${VERSION}` };
  let words = positionals;
  let help = values.help !== undefined;
  if (words[0] === "help") {
    help = true;
    words = words.slice(1);
  }
  if (words.length === 0) return { kind: "print", text: formatOverview() };
  const group = GROUPS.find((g) => g.name === words[0]);
  if (group === undefined) {
    throw new AdminError(`Unknown command "${clip(words[0])}" (see ${PROGRAM} help)`, 2);
  }
  const command = group.commands.find((c) => c.words.every((word, i) => words[i] === word));
  if (command === undefined) {
    if (words.length === 1) return { kind: "print", text: formatGroup(group) };
    throw new AdminError(
      `Unknown command "${group.name} ${clip(words[1])}" (see ${PROGRAM} ${group.name} --help)`,
      2,
    );
  }
  if (help) return { kind: "print", text: formatCommand(command) };
  return {
    kind: "run",
    command,
    values,
    options: checkOptions(command, values),
    args: checkArguments(command, words.slice(command.words.length)),
  };
}

/** Refuses options the command does not take; turns booleans given as `=off` into absence. */
function checkOptions(
  command: Command,
  values: Record<string, string>,
): Record<string, string | undefined> {
  const name = command.words.join(" ");
  const options: Record<string, string | undefined> = {};
  for (const [option, text] of Object.entries(values)) {
    const spec = command.options.find((o) => o.name === option) ??
      GLOBAL_OPTIONS.find((o) => o.name === option);
    if (spec === undefined) {
      throw new AdminError(
        `Option --${option} does not apply to "${name}" (see ${PROGRAM} ${name} --help)`,
        2,
      );
    }
    if (spec.kind === "boolean") {
      let on: boolean;
      try {
        on = parseBoolean(text);
      } catch (error) {
        throw new AdminError(`Invalid --${option} "${clip(text)}": ${(error as Error).message}`, 2);
      }
      if (on) options[option] = "on";
    } else {
      options[option] = text;
    }
  }
  return options;
}

/** Names the positionals; a missing or extra one is a usage error. */
function checkArguments(command: Command, rest: string[]): Record<string, string | undefined> {
  const usage = `usage: ${formatUsage(command)}`;
  const named: Record<string, string | undefined> = {};
  command.arguments.forEach((arg, i) => {
    if (rest[i] === undefined && !arg.optional) {
      throw new AdminError(`Missing ${arg.name} (${usage})`, 2);
    }
    named[arg.name] = rest[i];
  });
  if (rest.length > command.arguments.length) {
    if (command.readsPassword) {
      throw new AdminError(
        `Unexpected argument after ${command.arguments.at(-1)!.name}: ${PASSWORD_ARGUMENT}`,
        2,
      );
    }
    throw new AdminError(
      `Unexpected argument "${clip(rest[command.arguments.length])}" (${usage})`,
      2,
    );
  }
  return named;
}

/** An argument as a message shows it: without a password, at most 64 characters. */
function clip(text: string): string {
  const shown = redactCredentials(text);
  return shown.length > 64 ? `${shown.slice(0, 64)}…` : shown;
}
