/**
 * The admin API's JSON: reading a request body as an object, reading typed
 * fields and query parameters from it, and writing responses and errors.
 * Every refusal is an {@link HttpError} 4xx with a message that names the field.
 *
 * @module
 */
import { parseStrictJson } from "../../formats/json.ts";
import { toPrintable } from "../../formats/printable.ts";
import { readBody } from "../body.ts";
import { HttpError } from "../errors.ts";

/** The one media type of the admin API. */
export const JSON_TYPE = "application/json; charset=utf-8";

/** A JSON object read from a request body. */
export type JsonObject = Record<string, unknown>;

/**
 * JSON text in which no control character is raw: `JSON.stringify` escapes
 * C0, this also DEL and C1, so a stored label printed by `curl` to a terminal
 * cannot act on it. The value is the same.
 */
function toJsonText(value: unknown): string {
  return toPrintable(JSON.stringify(value));
}

/** A JSON response. */
export function toJson(body: unknown, status = 200): Response {
  return new Response(toJsonText(body), { status, headers: { "content-type": JSON_TYPE } });
}

/** The admin API's error document: `{"error": {"code", "message"}}`. */
export function toJsonError(error: HttpError): Response {
  const headers = new Headers(error.headers);
  headers.set("content-type", JSON_TYPE);
  return new Response(
    toJsonText({ error: { code: error.code, message: error.message } }),
    { status: error.status, headers },
  );
}

function invalid(message: string): HttpError {
  return new HttpError(400, "invalid_request", message);
}

/**
 * Reads the body as a JSON object; an empty body is `{}`.
 *
 * @throws {HttpError} 415 for another media type, 400 for anything but an
 * object (or one that repeats a key or holds a lone surrogate), 413 and 408
 * as {@link readBody}.
 */
export async function readJsonObject(request: Request): Promise<JsonObject> {
  const type = request.headers.get("content-type");
  const text = await readBody(request);
  if (text.trim() === "") return {};
  if (type === null || !/^application\/json\s*(;|$)/i.test(type)) {
    throw new HttpError(
      415,
      "unsupported_media_type",
      "Unsupported Content-Type: send application/json",
    );
  }
  let value: unknown;
  try {
    // Repeated keys are refused, as on the public API: never "the last one wins".
    value = parseStrictJson(text);
  } catch (error) {
    const reason = (error as Error).message.replace(/^Cannot parse JSON: /, "");
    throw invalid(`Cannot parse request body: ${reason}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid("Cannot parse request body: expected a JSON object");
  }
  return value as JsonObject;
}

/** Refuses fields the endpoint does not know, so a typo is not silently ignored. */
export function allowFields(body: JsonObject, names: readonly string[]): void {
  const unknown = Object.keys(body).find((name) => !names.includes(name));
  if (unknown !== undefined) {
    throw invalid(`Unknown field "${unknown.slice(0, 64)}": expected ${names.join(", ")}`);
  }
}

/** A string field; `undefined` when absent. */
export function optionalString(
  body: JsonObject,
  name: string,
  maxLength = 1024,
): string | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw invalid(`Invalid "${name}": expected a string`);
  if (value.length > maxLength) {
    throw invalid(`Invalid "${name}": at most ${maxLength} characters`);
  }
  return value;
}

/** A string field that must be there. */
export function requiredString(body: JsonObject, name: string, maxLength = 1024): string {
  const value = optionalString(body, name, maxLength);
  if (value === undefined) throw invalid(`Missing "${name}"`);
  return value;
}

/** A boolean field; `undefined` when absent. */
export function optionalBoolean(body: JsonObject, name: string): boolean | undefined {
  const value = body[name];
  if (value === undefined || typeof value === "boolean") return value;
  throw invalid(`Invalid "${name}": expected true or false`);
}

/** A path parameter that is a row id. @throws {HttpError} 404 otherwise (no such row). */
export function toRowId(text: string, what: string): number {
  if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new HttpError(404, "not_found", `No ${what} "${text.slice(0, 32)}"`);
  }
  return Number(text);
}

/** A page size from `?limit=`, 1 to `max`, default `fallback`. */
export function toLimit(url: URL, fallback = 50, max = 200): number {
  const text = url.searchParams.get("limit");
  if (text === null) return fallback;
  if (!/^[0-9]{1,4}$/.test(text) || Number(text) < 1 || Number(text) > max) {
    throw invalid(`Invalid "limit": expected a whole number from 1 to ${max}`);
  }
  return Number(text);
}

/** An ISO 8601 time (or milliseconds since the epoch) from a query parameter or field. */
export function toInstant(text: string, name: string): number {
  const ms = /^[0-9]{1,16}$/.test(text) ? Number(text) : Date.parse(text);
  if (!Number.isFinite(ms) || !/^[0-9]/.test(text)) {
    throw invalid(`Invalid "${name}": expected an ISO 8601 time such as 2026-05-01T12:00:00Z`);
  }
  return ms;
}

/** A time as the admin API writes it. */
export function toIso(ms: number): string;
export function toIso(ms: number | null): string | null;
export function toIso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
