/**
 * The token endpoint's request document, `auth_request`, in JSON or XML:
 *
 * ```xml
 * <auth_request>
 *   <user><email>…</email><password>…</password></user>
 *   <api_key>…</api_key>
 * </auth_request>
 * ```
 *
 * Values are taken exactly as sent: never trimmed, never converted.
 *
 * @module
 */
import { parseJson } from "./json.ts";
import type { Format } from "./format.ts";
import { parseXml, type XmlChildren, type XmlElement } from "./xml.ts";

/** An `auth_request` as sent; `apiKey` is absent when the body has none. */
export interface AuthRequest {
  email: string;
  password: string;
  apiKey?: string;
}

/**
 * Parses an `auth_request` document.
 *
 * @throws {SyntaxError} for a body that is not well-formed, not of the
 * expected shape, or that repeats a field.
 */
export function parseAuthRequest(text: string, format: Format): AuthRequest {
  return format === "json" ? fromJson(parseJson(text)) : fromXml(parseXml(text));
}

function shapeError(detail: string): SyntaxError {
  return new SyntaxError(`Invalid auth_request: ${detail}`);
}

// ---- JSON ---------------------------------------------------------------

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An own property (never one reached through `__proto__`). */
function own(object: JsonObject, name: string): unknown {
  return Object.hasOwn(object, name) ? object[name] : undefined;
}

function jsonString(object: JsonObject, name: string, path: string): string | undefined {
  const value = own(object, name);
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw shapeError(`"${path}" must be a string`);
  return value;
}

function fromJson(document: unknown): AuthRequest {
  if (!isObject(document)) throw shapeError("expected a JSON object");
  const request = own(document, "auth_request");
  if (!isObject(request)) throw shapeError('expected an object "auth_request"');
  const user = own(request, "user");
  if (!isObject(user)) throw shapeError('expected an object "auth_request.user"');
  const email = jsonString(user, "email", "auth_request.user.email");
  const password = jsonString(user, "password", "auth_request.user.password");
  if (email === undefined) throw shapeError('missing "auth_request.user.email"');
  if (password === undefined) throw shapeError('missing "auth_request.user.password"');

  const inner = jsonString(request, "api_key", "auth_request.api_key");
  const outer = jsonString(document, "api_key", "api_key");
  if (inner !== undefined && outer !== undefined && inner.toLowerCase() !== outer.toLowerCase()) {
    throw shapeError('"api_key" is given twice with different values');
  }
  const apiKey = inner ?? outer;
  return apiKey === undefined ? { email, password } : { email, password, apiKey };
}

// ---- XML ----------------------------------------------------------------

/** The children of `element`, refusing text beside them and names not in `allowed`. */
function xmlChildren(element: XmlElement, path: string, allowed: readonly string[]): XmlChildren {
  if (typeof element === "string") {
    if (element.trim() === "") return {};
    throw shapeError(`<${path}> must contain elements, not text`);
  }
  if ((element["#text"] ?? "").trim() !== "") {
    throw shapeError(`<${path}> must contain elements, not text`);
  }
  for (const name of Object.keys(element)) {
    if (name !== "#text" && !allowed.includes(name)) {
      throw shapeError(`unexpected element <${name.slice(0, 64)}> in <${path}>`);
    }
  }
  return element;
}

/** The one occurrence of child `name`, or `undefined`; refuses repeats. */
function xmlOnce(children: XmlChildren, name: string, path: string): XmlElement | undefined {
  const occurrences = children[name];
  if (occurrences === undefined || typeof occurrences === "string") return undefined;
  if (occurrences.length > 1) throw shapeError(`<${path}> is given more than once`);
  return occurrences[0];
}

function xmlText(children: XmlChildren, name: string, path: string): string | undefined {
  const element = xmlOnce(children, name, path);
  if (element === undefined) return undefined;
  if (typeof element !== "string") throw shapeError(`<${path}> must contain text, not elements`);
  return element;
}

function fromXml(document: XmlChildren): AuthRequest {
  const roots = Object.keys(document).filter((name) => name !== "#text");
  if (roots.length !== 1 || roots[0] !== "auth_request") {
    throw shapeError('expected root element "auth_request"');
  }
  const request = xmlChildren(
    xmlOnce(document, "auth_request", "auth_request")!,
    "auth_request",
    ["user", "api_key"],
  );
  const userElement = xmlOnce(request, "user", "auth_request/user");
  if (userElement === undefined) throw shapeError('missing element "auth_request/user"');
  const user = xmlChildren(userElement, "auth_request/user", ["email", "password"]);
  const email = xmlText(user, "email", "auth_request/user/email");
  const password = xmlText(user, "password", "auth_request/user/password");
  if (email === undefined) throw shapeError('missing element "auth_request/user/email"');
  if (password === undefined) throw shapeError('missing element "auth_request/user/password"');
  const apiKey = xmlText(request, "api_key", "auth_request/api_key");
  return apiKey === undefined ? { email, password } : { email, password, apiKey };
}
