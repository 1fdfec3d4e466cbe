/**
 * Parsing of JSON request bodies: strict JSON first, then JSON5 for the
 * single-quoted form that GlobalGiving's documentation shows. Duplicate keys
 * are refused, as duplicate XML elements are, rather than silently letting the
 * last one win, however a key is spelled (escapes included: `\u0070assword`
 * is `password`). A string that is not well-formed Unicode (a lone surrogate
 * from `\ud800`) is refused: it would be repaired on its way to UTF-8.
 * Nesting is bounded, as in XML: keygate's documents need 3 levels.
 *
 * @module
 */
import JSON5 from "json5";

/** Arrays and objects nested deeper than this are refused. */
export const MAX_JSON_DEPTH = 32;

/**
 * Parses `text` as JSON, or JSON5 when it is not strict JSON.
 *
 * @throws {SyntaxError} when it is neither, or when an object repeats a key.
 */
export function parseJson(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    try {
      value = JSON5.parse(escapeSeparators(text));
    } catch (error) {
      throw new SyntaxError(
        `Cannot parse JSON: ${(error as Error).message.replace(/^JSON5: /, "")}`,
      );
    }
  }
  return checkParsed(text, value);
}

/**
 * Parses `text` as strict JSON only (no JSON5), refusing what {@link parseJson}
 * refuses: repeated keys, lone surrogates and deep nesting. The admin API's bodies.
 *
 * @throws {SyntaxError} when it is not JSON, or when an object repeats a key.
 */
export function parseStrictJson(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new SyntaxError(`Cannot parse JSON: ${(error as Error).message}`);
  }
  return checkParsed(text, value);
}

/** `value`, parsed from `text`, unless a key repeats or a string is not well-formed. */
function checkParsed(text: string, value: unknown): unknown {
  const duplicate = findDuplicateKey(text);
  if (duplicate !== undefined) {
    throw new SyntaxError(`Cannot parse JSON: duplicate key "${duplicate.slice(0, 64)}"`);
  }
  if (!isWellFormed(value, 0)) {
    throw new SyntaxError("Cannot parse JSON: a string holds a lone surrogate (\\uD800-\\uDFFF)");
  }
  return value;
}

/**
 * Whether every string and key in `value` is well-formed Unicode.
 *
 * @throws {SyntaxError} for nesting deeper than {@link MAX_JSON_DEPTH} (before
 * the walk would exhaust the call stack).
 */
function isWellFormed(value: unknown, depth: number): boolean {
  if (typeof value === "string") return value.isWellFormed();
  if (value === null || typeof value !== "object") return true;
  if (depth >= MAX_JSON_DEPTH) {
    throw new SyntaxError(`Cannot parse JSON: nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  if (Array.isArray(value)) return value.every((item) => isWellFormed(item, depth + 1));
  return Object.entries(value).every(([key, item]) =>
    key.isWellFormed() && isWellFormed(item, depth + 1)
  );
}

/**
 * A string literal of a valid JSON or JSON5 document, decoded: by the native parser when it is
 * JSON's (which JSON5 reads the same), else by JSON5 (single quotes, `\x41`, line continuations).
 */
function decodeString(literal: string): string {
  if (literal.startsWith('"')) {
    try {
      return JSON.parse(literal);
    } catch {
      // JSON5's escapes: below.
    }
  }
  return JSON5.parse<string>(escapeSeparators(literal));
}

const SEPARATORS = /[\u2028\u2029]/;

/**
 * `text` with each raw U+2028 and U+2029 inside a string literal written as its escape: the same
 * document to JSON5, which would otherwise write a warning ("'\u2028' in strings is not valid
 * ECMAScript") with `console.warn`, as plain text into the JSON log stream. json5 has no option
 * to silence it, and replacing `console.warn` would be a global patch. Outside strings the
 * characters are line terminators (also ending a `//` comment) and stay as they are, as does one
 * after a backslash (a line continuation).
 */
function escapeSeparators(text: string): string {
  if (!SEPARATORS.test(text)) return text;
  let out = "";
  let quote = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote !== "") {
      if (c === "\\") {
        out += c + (text[i + 1] ?? "");
        i++;
        continue;
      }
      if (c === quote) quote = "";
      out += c === "\u2028" ? "\\u2028" : c === "\u2029" ? "\\u2029" : c;
    } else if (c === '"' || c === "'") {
      quote = c;
      out += c;
    } else if (c === "/" && (text[i + 1] === "/" || text[i + 1] === "*")) {
      // A comment, copied whole: a quote in it opens no string.
      const line = text[i + 1] === "/";
      const close = line ? lineEndAfter(text, i) : text.indexOf("*/", i + 2);
      const stop = close === -1 ? text.length : line ? close : close + 2;
      out += text.slice(i, stop);
      i = stop - 1;
    } else {
      out += c;
    }
  }
  return out;
}

/** What ends a JSON5 `//` comment (ECMAScript's line terminators): not only a line feed. */
const LINE_END = /[\n\r\u2028\u2029]/g;

/** Where the line that holds `from` ends (its terminator's index), or -1 at the text's end. */
function lineEndAfter(text: string, from: number): number {
  LINE_END.lastIndex = from;
  return LINE_END.exec(text)?.index ?? -1;
}

/** The character (a whole code point) at `i`. */
function charAt(text: string, i: number): string {
  return String.fromCodePoint(text.codePointAt(i)!);
}

/** JSON5 identifier names (ECMAScript's): Unicode letters, `$`, `_`, and `\uXXXX` escapes. */
const IDENTIFIER_START = /[\p{ID_Start}$_\\]/u;
const IDENTIFIER_PART = /[\p{ID_Continue}$\u200c\u200d\\]/u;

/**
 * Returns the first key that appears twice in one object of a document that
 * is already known to be valid JSON or JSON5, or `undefined`.
 */
export function findDuplicateKey(text: string): string | undefined {
  const objects: (Set<string> | null)[] = []; // null marks an array
  let i = 0;

  const skipBlank = () => {
    while (i < text.length) {
      if (/\s/.test(text[i])) i++;
      else if (text.startsWith("//", i)) i = nextIndex(lineEndAfter(text, i));
      else if (text.startsWith("/*", i)) i = nextIndex(text.indexOf("*/", i), 2);
      else break;
    }
  };
  const nextIndex = (found: number, width = 1) => (found === -1 ? text.length : found + width);
  // Whether the literal just read is an object's key (a colon follows): only keys are decoded.
  const isKey = (): boolean => {
    skipBlank();
    return text[i] === ":" && objects.at(-1) instanceof Set;
  };
  const isRepeated = (key: string): boolean => {
    const keys = objects.at(-1)!;
    if (keys.has(key)) return true;
    keys.add(key);
    return false;
  };

  while (i < text.length) {
    const c = text[i];
    if (c === '"' || c === "'") {
      const start = i++;
      while (i < text.length && text[i] !== c) i += text[i] === "\\" ? 2 : 1;
      const literal = text.slice(start, ++i);
      if (!isKey()) continue;
      const key = decodeString(literal);
      if (isRepeated(key)) return key;
    } else if (c === "{") {
      objects.push(new Set());
      i++;
    } else if (c === "[") {
      objects.push(null);
      i++;
    } else if (c === "}" || c === "]") {
      objects.pop();
      i++;
    } else if (c === "/" && (text[i + 1] === "/" || text[i + 1] === "*")) {
      skipBlank();
    } else if (IDENTIFIER_START.test(charAt(text, i))) {
      // By code point: a letter beyond the BMP is one character of a JSON5 name, not two.
      const start = i;
      while (i < text.length && IDENTIFIER_PART.test(charAt(text, i))) {
        i += text[i] === "\\" ? 6 : charAt(text, i).length;
      }
      const raw = text.slice(start, i);
      if (!isKey()) continue;
      // The key as JSON5 reads it, escapes decoded; this only runs on valid documents.
      const key = raw.includes("\\") ? Object.keys(JSON5.parse(`{${raw}:0}`))[0] : raw;
      if (isRepeated(key)) return key;
    } else {
      i++;
    }
  }
  return undefined;
}
