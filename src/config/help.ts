/**
 * The server's `--help` text, generated from the settings table.
 *
 * @module
 */
import { type Setting, SETTINGS } from "./settings.ts";

const COLUMN = 32;

/** The text `--help` prints. */
export function formatHelp(): string {
  return [
    "keygate: API-key and access-token authentication over HTTPS",
    "",
    "Usage: deno task start [OPTIONS]",
    "       deno task admin COMMAND ...   (the admin CLI; see deno task admin help)",
    "",
    "Options (a flag overrides its environment variable):",
    ...SETTINGS.map(formatRow),
    "  -h, --help".padEnd(COLUMN) + "Print this help and exit",
    "  --version".padEnd(COLUMN) + "Print the version and exit",
    "",
    "Booleans take on, off, true, false, 1 or 0; a bare flag means on.",
    "DURATION is a whole number and a unit: 90s, 15m, 10h, 7d.",
    "Exit codes: 0 stopped cleanly, 1 the system refused (port in use, unwritable file),",
    "2 a setting is wrong (unknown flag, bad value, missing or unusable PEM file).",
    "",
  ].join("\n");
}

function formatRow(row: Setting): string {
  const fallback = row.default === undefined ? "" : `, default ${row.default}`;
  return [
    formatColumns(`  --${row.flag} ${row.placeholder}`, row.description, COLUMN),
    `${"".padEnd(COLUMN)}env ${row.env}${fallback}`,
  ].join("\n");
}

/**
 * Two help columns within 100 characters: `left` padded to `column`, then
 * `text` wrapped at word boundaries (a long `left` gets a line of its own).
 */
export function formatColumns(left: string, text: string, column: number): string {
  const [first, ...rest] = wrapWords(text, 100 - column);
  const head = left.length <= column - 2
    ? left.padEnd(column) + first
    : `${left}\n${"".padEnd(column)}${first}`;
  return [head, ...rest.map((line) => "".padEnd(column) + line)].join("\n");
}

/** Splits `text` into lines of at most `width` characters at spaces. */
export function wrapWords(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  lines.push(line);
  return lines;
}
