/**
 * Stored text made safe to show: control, invisible and bidirectional
 * characters written as `\u001b`-style escapes. Used by the admin CLI's
 * output and the admin API's JSON; the web console does the same to every
 * text it shows (console/dom.js, with the same character class).
 *
 * @module
 */

/**
 * The characters no name, label or e-mail may hold (src/auth/account_rules.ts refuses them in
 * new ones) and that stored rows show escaped: controls (C0, DEL, C1), format characters
 * (zero-width spaces and joiners, bidirectional embeddings, overrides, isolates and marks, the
 * byte order mark, U+061C), every other default-ignorable code point (variation selectors,
 * Hangul fillers, tags), line and paragraph separators, lone surrogates, and every white space
 * but the plain space U+0020 (no-break and typographic spaces, U+3000), which looks like it.
 */
export const UNSAFE_CHARACTERS =
  /[\p{Cc}\p{Cf}\p{Cs}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}]|[^\S ]/gu;

function toEscapes(character: string): string {
  let escaped = "";
  for (let i = 0; i < character.length; i++) {
    escaped += `\\u${character.charCodeAt(i).toString(16).padStart(4, "0")}`;
  }
  return escaped;
}

/**
 * `text` with every character of {@link UNSAFE_CHARACTERS} written as `\u001b`, `\u202e` and so
 * on (one escape per UTF-16 unit), so that a name, label or e-mail stored before such
 * characters were refused can neither move the cursor, retitle the terminal or fake a line, nor
 * hide or reorder what an operator reads (`billing\u202etxt.exe`, `ann\u200b@example.org`).
 * `keepNewlines` keeps `\n` (a printer's own line breaks). Applied to JSON text, the result is
 * still JSON with the same value.
 */
export function toPrintable(text: string, keepNewlines = true): string {
  return text.replace(
    UNSAFE_CHARACTERS,
    (c) => keepNewlines && c === "\n" ? c : toEscapes(c),
  );
}

/**
 * Whether `text` holds a C0 control character or DEL (`\0`, `\n`, `\x1b`, …): what no query
 * value, name or cursor key keygate reads may hold (PostgreSQL refuses a NUL in text outright).
 */
export function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x20 || unit === 0x7f) return true;
  }
  return false;
}
