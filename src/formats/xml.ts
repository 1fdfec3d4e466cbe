/**
 * Parsing of the small XML documents keygate accepts, on fast-xml-parser,
 * hardened: no DTDs or entity declarations, well-formedness checked before
 * parsing, values kept exactly as sent (no trimming, no number conversion),
 * attributes ignored, nesting bounded. A value is taken exactly as sent or
 * refused, never repaired: a character XML forbids (raw, or as a reference
 * such as `&#1;` or `&#xD800;`, which the parser would silently delete) and
 * any entity but XML's five (`&nbsp;` is HTML's) make the document invalid.
 *
 * @module
 */
import { XMLParser, XMLValidator } from "fast-xml-parser";

/** Elements nested deeper than this are refused. keygate's documents need 3. */
export const MAX_XML_DEPTH = 8;

/**
 * A parsed element: a string for a leaf, or its children by name, each name
 * holding every occurrence in document order. `#text` holds the text between
 * child elements.
 */
export type XmlElement = string | XmlChildren;
/** The children of an element, by name. */
export interface XmlChildren {
  [name: string]: XmlElement[] | string | undefined;
  "#text"?: string;
}

const parser = new XMLParser({
  ignoreAttributes: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  parseTagValue: false,
  trimValues: false,
  processEntities: true,
  // Also decodes numeric character references (&#233;); without it they stay as written.
  htmlEntities: true,
  isArray: () => true,
  maxNestedTags: MAX_XML_DEPTH,
});

const DTD = /<!(doctype|entity)/i;
/** XML 1.0 §2.2 `Char`; anything else may not appear, raw or as a reference. */
const NOT_XML_CHAR = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
/** Markup in which `&` starts no reference: CDATA sections, comments, processing instructions. */
const LITERAL_SECTIONS: readonly [string, string][] = [
  ["<![CDATA[", "]]>"],
  ["<!--", "-->"],
  ["<?", "?>"],
];
const REFERENCE = /&([^;&<]{0,12});?/g;
const PREDEFINED_ENTITIES: ReadonlySet<string> = new Set(["lt", "gt", "amp", "apos", "quot"]);

/**
 * Why `text` is refused before parsing, if it is: a character XML forbids, or
 * a reference that is not to one of XML's five entities or to an allowed character.
 */
function findForbiddenCharacter(text: string): string | undefined {
  if (!text.isWellFormed() || NOT_XML_CHAR.test(text)) return "a character XML does not allow";
  for (const [reference, name] of withoutLiteralSections(text).matchAll(REFERENCE)) {
    if (!reference.endsWith(";")) return "an unterminated reference";
    if (PREDEFINED_ENTITIES.has(name)) continue;
    const number = /^#(?:x([0-9A-Fa-f]{1,6})|([0-9]{1,7}))$/.exec(name);
    if (number === null) return `an entity XML does not define ("&${name.slice(0, 12)};")`;
    const code = number[1] !== undefined ? parseInt(number[1], 16) : Number(number[2]);
    if (code > 0x10ffff || NOT_XML_CHAR.test(String.fromCodePoint(code))) {
      return "a reference to a character XML does not allow";
    }
  }
  return undefined;
}

/**
 * `text` without its CDATA sections, comments and processing instructions,
 * found as an XML tokenizer finds them: a tag ends at the first `>` outside
 * its quoted attribute values, so a `<!--` inside a value opens no comment
 * (a regex over the whole text would skip everything up to a later `-->`,
 * references included). Each section removed leaves a `<`, so that no
 * reference is joined across it.
 */
function withoutLiteralSections(text: string): string {
  let rest = "";
  let i = 0;
  while (i < text.length) {
    const open = text.indexOf("<", i);
    if (open === -1) return rest + text.slice(i);
    const section = LITERAL_SECTIONS.find(([start]) => text.startsWith(start, open));
    if (section === undefined) {
      const end = findTagEnd(text, open);
      rest += text.slice(i, end);
      i = end;
    } else {
      const close = text.indexOf(section[1], open + section[0].length);
      rest += text.slice(i, open) + "<";
      i = close === -1 ? text.length : close + section[1].length;
    }
  }
  return rest;
}

/** The index just after the tag that starts at `text[open]`: its first `>` outside quotes. */
function findTagEnd(text: string, open: number): number {
  let quote = "";
  for (let i = open + 1; i < text.length; i++) {
    const c = text[i];
    if (quote !== "") {
      if (c === quote) quote = "";
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === ">") {
      return i + 1;
    }
  }
  return text.length;
}

/**
 * Parses an XML document into its root elements.
 *
 * @throws {SyntaxError} for a DOCTYPE or ENTITY declaration, a document that
 * is not well-formed, or nesting deeper than {@link MAX_XML_DEPTH}.
 */
export function parseXml(text: string): XmlChildren {
  if (DTD.test(text)) {
    throw new SyntaxError("Cannot parse XML: DOCTYPE and ENTITY declarations are not allowed");
  }
  const forbidden = findForbiddenCharacter(text);
  if (forbidden !== undefined) throw new SyntaxError(`Cannot parse XML: it contains ${forbidden}`);
  const validation = XMLValidator.validate(text);
  if (validation !== true) {
    throw new SyntaxError(
      // Only the position: the validator's own message quotes the text it choked on,
      // which may be part of the caller's password.
      `Cannot parse XML: not well-formed at line ${validation.err.line}, column ${validation.err.col}`,
    );
  }
  try {
    return parser.parse(text) as XmlChildren;
  } catch (error) {
    throw new SyntaxError(`Cannot parse XML: ${(error as Error).message}`);
  }
}
