/**
 * The body of introspection and revocation requests (RFC 7662, RFC 7009):
 * one `token`, and optionally a `token_type_hint` that keygate ignores (it
 * has one kind of token). Accepted as
 *
 * - a form (`application/x-www-form-urlencoded`): `token=…`, as the RFCs say;
 * - JSON: `{"token": "…"}`;
 * - XML: `<token_request><token>…</token></token_request>`.
 *
 * @module
 */
import { readBody } from "./body.ts";
import { HttpError } from "./errors.ts";
import { parseJson } from "../formats/json.ts";
import { findRequestFormat } from "./negotiate.ts";
import { parseXml, type XmlElement } from "../formats/xml.ts";

const FORM = "application/x-www-form-urlencoded";
/** Longest `token` value read; keygate's tokens have 40 characters. */
const MAX_TOKEN_LENGTH = 1024;

function shapeError(detail: string): SyntaxError {
  return new SyntaxError(`Invalid token request: ${detail}`);
}

/**
 * Parses a token request in `format`, returning the token as sent.
 *
 * @throws {SyntaxError} for a body that is malformed, of the wrong shape,
 * without a `token`, or that repeats it.
 */
export function parseTokenRequest(text: string, format: "form" | "json" | "xml"): string {
  const token = format === "form"
    ? fromForm(text)
    : format === "json"
    ? fromJson(parseJson(text))
    : fromXml(parseXml(text));
  if (token === "") throw shapeError('"token" is empty');
  if (token.length > MAX_TOKEN_LENGTH) throw shapeError('"token" is too long');
  return token;
}

/** `token=` and characters form decoding leaves as they are: the usual body, read without a parser. */
const PLAIN_FORM = /^token=([A-Za-z0-9._~-]+)$/;

function fromForm(text: string): string {
  const plain = PLAIN_FORM.exec(text);
  if (plain !== null) return plain[1];
  const values = new URLSearchParams(text).getAll("token");
  if (values.length === 0) throw shapeError('missing "token"');
  if (values.length > 1) throw shapeError('"token" is given more than once');
  return values[0];
}

function fromJson(document: unknown): string {
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw shapeError("expected a JSON object");
  }
  const token = Object.hasOwn(document, "token")
    ? (document as Record<string, unknown>).token
    : undefined;
  if (token === undefined) throw shapeError('missing "token"');
  if (typeof token !== "string") throw shapeError('"token" must be a string');
  return token;
}

function fromXml(document: Record<string, XmlElement[] | string | undefined>): string {
  const roots = Object.keys(document).filter((name) => name !== "#text");
  const root = document.token_request;
  if (roots.length !== 1 || !Array.isArray(root) || root.length !== 1) {
    throw shapeError('expected root element "token_request"');
  }
  const children = root[0];
  if (typeof children === "string") throw shapeError('missing element "token_request/token"');
  for (const name of Object.keys(children)) {
    if (name !== "#text" && name !== "token" && name !== "token_type_hint") {
      throw shapeError(`unexpected element <${name.slice(0, 64)}> in <token_request>`);
    }
  }
  const tokens = children.token;
  if (!Array.isArray(tokens)) throw shapeError('missing element "token_request/token"');
  if (tokens.length > 1) throw shapeError("<token_request/token> is given more than once");
  if (typeof tokens[0] !== "string") throw shapeError("<token_request/token> must contain text");
  return tokens[0];
}

/** Whether a request's body is declared a form, the only body that may carry client credentials. */
export function isFormBody(request: Request): boolean {
  return request.headers.get("content-type")?.split(";", 1)[0].trim().toLowerCase() === FORM;
}

/** A token request as read: the token, and the form's fields when the body was a form. */
export interface TokenRequest {
  token: string;
  /**
   * The form's fields, for OAuth client credentials (`client_id`,
   * `client_secret`); `undefined` for JSON, XML and a form of `token=` alone.
   */
  form?: URLSearchParams;
}

/**
 * Reads and parses a token request body (size cap and deadline as every body).
 *
 * @throws {HttpError} 400, 408, 413 or 415 as `readDocument`.
 */
export async function readTokenRequest(request: Request): Promise<TokenRequest> {
  const text = await readBody(request);
  if (text.trim() === "") throw new HttpError(400, "invalid_request", "Missing request body");
  const contentType = request.headers.get("content-type");
  const mediaType = contentType?.split(";", 1)[0].trim().toLowerCase();
  let format: "form" | "json" | "xml";
  try {
    format = mediaType === FORM ? "form" : findRequestFormat(contentType, text);
  } catch (error) {
    if (!(error instanceof HttpError) || mediaType === undefined) throw error;
    throw new HttpError(
      415,
      "unsupported_media_type",
      `Unsupported Content-Type "${
        mediaType.slice(0, 100)
      }": expected ${FORM}, application/json, application/xml or text/xml`,
    );
  }
  let token: string;
  try {
    token = parseTokenRequest(text, format);
  } catch (error) {
    if (error instanceof SyntaxError) {
      throw new HttpError(400, "invalid_request", `Cannot parse request body: ${error.message}`);
    }
    throw error;
  }
  const plain = format !== "form" || PLAIN_FORM.test(text);
  return plain ? { token } : { token, form: new URLSearchParams(text) };
}
