/**
 * Parsing of the small XML documents keygate accepts, on fast-xml-parser,
 * hardened: no DTDs or entity declarations, well-formedness checked before
 * parsing, values kept exactly as sent (no trimming, no number conversion),
 * attributes ignored, nesting bounded.
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
