/**
 * Encoding of keygate's documents as JSON or XML responses.
 *
 * Every body keygate writes goes through {@link toResponse}, so the two
 * formats stay mirror images of each other and the `Content-Type` is always
 * exactly `application/json; charset=utf-8` or `application/xml; charset=utf-8`.
 *
 * @module
 */
import type { Format } from "../formats/format.ts";

/** A document value: strings, numbers, booleans, nested objects and arrays of them. */
export type DocumentValue = string | number | boolean | DocumentValue[] | {
  [name: string]: DocumentValue;
};

export const CONTENT_TYPES: Readonly<Record<Format, string>> = {
  json: "application/json; charset=utf-8",
  xml: "application/xml; charset=utf-8",
};

const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>';

const XML_ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};
const XML_SPECIAL = /[&<>"']/g;
/** Characters XML 1.0 cannot carry at all (control characters, U+FFFE/U+FFFF, lone surrogates). */
const NOT_XML_CHAR = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;
/** Text that needs neither: printable ASCII without `&<>"'` (most values: e-mails, times, ids). */
const PLAIN_TEXT = /^[\t\n\r\x20\x21\x23-\x25\x28-\x3b\x3d\x3f-\x7e]*$/;

/**
 * `<name>value</name>`: an array repeats the element, an object nests its
 * fields in order, anything else is escaped text. Element names are ours,
 * never the caller's. (Hand-written rather than fast-xml-parser's builder:
 * it is this simple, and it runs on every secure request.)
 */
function toXmlElement(name: string, value: DocumentValue): string {
  if (Array.isArray(value)) return value.map((item) => toXmlElement(name, item)).join("");
  if (typeof value === "object") {
    let inner = "";
    for (const key in value) inner += toXmlElement(key, value[key]);
    return `<${name}>${inner}</${name}>`;
  }
  if (typeof value !== "string" || PLAIN_TEXT.test(value)) return `<${name}>${value}</${name}>`;
  const text = value.replace(NOT_XML_CHAR, "\uFFFD").replace(XML_SPECIAL, (c) => XML_ESCAPES[c]);
  return `<${name}>${text}</${name}>`;
}

/** Serialises `{ [root]: body }` in the given format. */
export function toDocument(format: Format, root: string, body: DocumentValue): string {
  if (format === "json") return JSON.stringify({ [root]: body });
  return XML_DECLARATION + toXmlElement(root, body);
}

/** Builds a response holding `{ [root]: body }` in the given format. */
export function toResponse(
  format: Format,
  root: string,
  body: DocumentValue,
  init: ResponseInit = {},
): Response {
  const text = toDocument(format, root, body);
  if (init.headers === undefined) {
    // The common case, without a Headers object to copy.
    return new Response(text, { ...init, headers: { "content-type": CONTENT_TYPES[format] } });
  }
  const headers = new Headers(init.headers);
  headers.set("content-type", CONTENT_TYPES[format]);
  return new Response(text, { ...init, headers });
}
