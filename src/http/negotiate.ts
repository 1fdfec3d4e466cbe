/**
 * Content negotiation. The request's format comes from `Content-Type` and the
 * response's from `Accept` (or a `.json`/`.xml` path suffix): the two are
 * independent, as GlobalGiving clients expect.
 *
 * @module
 */
import { HttpError } from "./errors.ts";
import type { Format } from "../formats/format.ts";

const REQUEST_TYPES: Readonly<Record<string, Format>> = {
  "application/json": "json",
  "application/xml": "xml",
  "text/xml": "xml",
};

/**
 * The format of a request body: from `Content-Type` (parameters ignored), or,
 * when there is none, from the body's first non-blank character.
 *
 * @throws {HttpError} 415 for any other declared type, or an undeclared body
 * that starts with neither `{` nor `<`.
 */
export function findRequestFormat(contentType: string | null, body: string): Format {
  const mediaType = contentType?.split(";", 1)[0].trim().toLowerCase() ?? "";
  if (mediaType !== "") {
    const format = REQUEST_TYPES[mediaType];
    if (format) return format;
    throw new HttpError(
      415,
      "unsupported_media_type",
      `Unsupported Content-Type "${
        mediaType.slice(0, 100)
      }": expected application/json, application/xml or text/xml`,
    );
  }
  const first = body.trimStart()[0];
  if (first === "{") return "json";
  if (first === "<") return "xml";
  throw new HttpError(
    415,
    "unsupported_media_type",
    "Missing Content-Type: expected application/json, application/xml or text/xml",
  );
}

interface Preference {
  q: number;
  /** 3 for an exact type, 2 for `type/*`, 1 for `*\/*`, 0 for no match. */
  specificity: number;
}

const OFFERS: Readonly<Record<Format, readonly string[]>> = {
  json: ["application/json"],
  xml: ["application/xml", "text/xml"],
};

function preferenceFor(ranges: { type: string; q: number }[], offers: readonly string[]) {
  const best: Preference = { q: 0, specificity: 0 };
  for (const offer of offers) {
    const [offerType] = offer.split("/");
    for (const range of ranges) {
      const specificity = range.type === offer
        ? 3
        : range.type === `${offerType}/*`
        ? 2
        : range.type === "*/*"
        ? 1
        : 0;
      if (
        specificity > best.specificity ||
        (specificity === best.specificity && specificity > 0 && range.q > best.q)
      ) {
        best.specificity = specificity;
        best.q = range.q;
      }
    }
  }
  return best;
}

/**
 * The response format for an `Accept` header, or `undefined` when neither
 * JSON nor XML is acceptable (406).
 *
 * JSON wins when `application/json` is listed, wherever it stands, unless XML
 * has a higher q-value; XML is the default, so it wins for a missing header,
 * `*\/*` alone, or a tie between wildcards.
 */
export function negotiateResponseFormat(accept: string | null): Format | undefined {
  if (accept === null || accept.trim() === "") return "xml";
  const ranges = accept.split(",").map((part) => {
    const [type, ...params] = part.split(";");
    let q = 1;
    for (const param of params) {
      const [name, value] = param.split("=").map((s) => s.trim());
      if (name.toLowerCase() === "q") {
        const parsed = Number(value);
        q = Number.isFinite(parsed) ? Math.min(Math.max(parsed, 0), 1) : 0;
      }
    }
    return { type: type.trim().toLowerCase(), q };
  });
  const json = preferenceFor(ranges, OFFERS.json);
  const xml = preferenceFor(ranges, OFFERS.xml);
  if (json.q === 0 && xml.q === 0) return undefined;
  if (json.q !== xml.q) return json.q > xml.q ? "json" : "xml";
  return json.specificity === 3 ? "json" : "xml";
}
