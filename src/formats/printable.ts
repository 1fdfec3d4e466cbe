/**
 * Stored text made safe for a terminal: control characters written as
 * `\u001b` escapes. Used by the admin CLI's output and the admin API's JSON.
 *
 * @module
 */

// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x1f\x7f-\x9f]/g;
// deno-lint-ignore no-control-regex
const CONTROL_BUT_NEWLINE = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/g;

/**
 * `text` with every control character (C0, DEL, C1) written as `\u001b` and
 * so on, so that a name, label or e-mail stored before such characters were
 * refused cannot move the cursor, retitle the terminal or fake a line.
 * `keepNewlines` keeps `\n` (a printer's own line breaks). Applied to JSON
 * text, the result is still JSON with the same value.
 */
export function toPrintable(text: string, keepNewlines = true): string {
  return text.replace(
    keepNewlines ? CONTROL_BUT_NEWLINE : CONTROL,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
