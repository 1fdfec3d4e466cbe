/**
 * Encoding of keygate's documents as JSON or XML responses.
 *
 * Every body keygate writes goes through {@link toResponse}, so the two
 * formats stay mirror images of each other and the `Content-Type` is always
 * exactly `application/json; charset=utf-8` or `application/xml; charset=utf-8`.
 *
 * @module
 */
import { XMLBuilder } from "fast-xml-parser";

/** The two formats keygate reads and writes. */
export type Format = "json" | "xml";

/** A document value: strings, numbers, booleans, nested objects and arrays of them. */
export type DocumentValue = string | number | boolean | DocumentValue[] | {
  [name: string]: DocumentValue;
};

export const CONTENT_TYPES: Readonly<Record<Format, string>> = {
  json: "application/json; charset=utf-8",
  xml: "application/xml; charset=utf-8",
};

const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>';

const builder = new XMLBuilder({
  ignoreAttributes: true,
  processEntities: true,
  suppressEmptyNode: false,
  format: false,
});

/** Serialises `{ [root]: body }` in the given format. */
export function toDocument(format: Format, root: string, body: DocumentValue): string {
  if (format === "json") return JSON.stringify({ [root]: body });
  return XML_DECLARATION + builder.build({ [root]: body });
}

/** Builds a response holding `{ [root]: body }` in the given format. */
export function toResponse(
  format: Format,
  root: string,
  body: DocumentValue,
  init: ResponseInit = {},
): Response {
  const headers = new Headers(init.headers);
  headers.set("content-type", CONTENT_TYPES[format]);
  return new Response(toDocument(format, root, body), { ...init, headers });
}
