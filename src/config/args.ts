/**
 * The command-line tokenizer shared by the server and the admin CLI: long
 * options (`--name value`, `--name=value`), booleans (a bare `--name` means
 * on), `-h`, and positional arguments. Strict: an unknown option, a missing
 * value or a repeated option is an error. A single leading `--` (the npm
 * habit of `deno task start -- --port 0`) is ignored.
 *
 * @module
 */
import { redactCredentials } from "../store/store_url.ts";
import { BOOLEAN_WORDS } from "./parsers.ts";

/** One option a command accepts. */
export interface OptionSpec {
  /** The long name, without `--`. */
  name: string;
  /** A one-letter alias, without `-`. */
  short?: string;
  /** `boolean`: a bare flag means on; otherwise a value is required. */
  kind: "value" | "boolean";
}

/** What {@link parseArguments} found. */
export interface ParsedArguments {
  /** The options given, by long name: the text after them, or `"on"` for a bare boolean. */
  values: Record<string, string>;
  positionals: string[];
}

/** Options for {@link parseArguments}. */
export interface ParseArgumentsOptions {
  /**
   * When positionals are not allowed (the server), a boolean option also takes the next
   * argument if it is one of on/off/true/false/1/0, so `--metrics off` works.
   */
  positionals: boolean;
}

/**
 * Splits `args` into options and positionals.
 *
 * @throws {SyntaxError} with a one-line message naming the offending argument.
 */
export function parseArguments(
  args: readonly string[],
  specs: readonly OptionSpec[],
  options: ParseArgumentsOptions,
): ParsedArguments {
  const values: Record<string, string> = {};
  const positionals: string[] = [];
  const rest = args[0] === "--" ? args.slice(1) : [...args];
  let onlyPositionals = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (onlyPositionals || arg === "-" || !arg.startsWith("-")) {
      if (!options.positionals) throw new SyntaxError(`Unexpected argument "${clip(arg)}"`);
      positionals.push(arg);
      continue;
    }
    if (arg === "--") {
      onlyPositionals = true;
      continue;
    }
    const long = arg.startsWith("--");
    const equals = arg.indexOf("=");
    const name = long ? arg.slice(2, equals === -1 ? undefined : equals) : arg.slice(1);
    const spec = long
      ? specs.find((s) => s.name === name)
      : specs.find((s) => s.short !== undefined && s.short === name);
    if (spec === undefined) throw new SyntaxError(`Unknown option "${clip(arg)}"`);
    if (values[spec.name] !== undefined) {
      throw new SyntaxError(`Option --${spec.name} is given more than once`);
    }
    const inline = long && equals !== -1 ? arg.slice(equals + 1) : undefined;
    if (spec.kind === "boolean") {
      const next = rest[i + 1];
      if (inline !== undefined) {
        values[spec.name] = inline;
      } else if (!options.positionals && next !== undefined && isBooleanWord(next)) {
        values[spec.name] = next;
        i++;
      } else {
        values[spec.name] = "on";
      }
      continue;
    }
    if (inline !== undefined) {
      values[spec.name] = inline;
      continue;
    }
    const next = rest[i + 1];
    if (next === undefined || (next.startsWith("--") && next.length > 2)) {
      throw new SyntaxError(`Option --${spec.name} needs a value`);
    }
    values[spec.name] = next;
    i++;
  }
  return { values, positionals };
}

function isBooleanWord(text: string): boolean {
  return (BOOLEAN_WORDS as readonly string[]).includes(text.toLowerCase());
}

/** An argument as a message shows it: without a password, at most 64 characters. */
function clip(text: string): string {
  const shown = redactCredentials(text);
  return shown.length > 64 ? `${shown.slice(0, 64)}…` : shown;
}
