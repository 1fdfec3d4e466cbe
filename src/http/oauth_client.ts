/**
 * Standard OAuth client authentication for the resource-server endpoints
 * (introspection and revocation), as off-the-shelf clients send it
 * (RFC 6749 section 2.3.1):
 *
 * - `client_secret_basic`: `Authorization: Basic base64(id ":" secret)`, each
 *   part form-encoded first;
 * - `client_secret_post`: `client_id` and `client_secret` in the form body.
 *
 * The client id is the API key's id (as `key list` shows it) and the secret
 * is the key itself. A caller that authenticates this way gets its errors in
 * RFC 6749 section 5.2's JSON ({@link toOAuthErrorResponse}); one that sends
 * `X-Api-Key` keeps keygate's own `error_response`.
 *
 * @module
 */
import { HttpError } from "./errors.ts";

/** How a client authenticated (RFC 8414's names, as the metadata document lists them). */
export type ClientAuthMethod = "client_secret_basic" | "client_secret_post";

/** The client authentication methods keygate accepts, in order of preference. */
export const CLIENT_AUTH_METHODS: readonly ClientAuthMethod[] = [
  "client_secret_basic",
  "client_secret_post",
];

/** Credentials a client presented: the key's id and the key. */
export interface ClientCredentials {
  method: ClientAuthMethod;
  id: string;
  secret: string;
}

/** The longest client id or secret read: a key id is a number, a key 36 characters. */
const MAX_CREDENTIAL_LENGTH = 256;
const BASIC = /^Basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

function invalidClient(message: string): HttpError {
  return new HttpError(401, "invalid_client", message);
}

/** Form decoding of one credential: `+` is a space, then percent-decoding. */
function formDecode(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll("+", " "));
  } catch {
    throw invalidClient("Invalid client credentials: not form-encoded");
  }
}

/** Whether a request's `Authorization` names the Basic scheme. */
export function hasBasicAuthorization(request: Request): boolean {
  return /^Basic(?:[ \t]|$)/i.test(request.headers.get("authorization") ?? "");
}

/**
 * The `client_secret_basic` credentials of a request whose `Authorization`
 * is Basic ({@link hasBasicAuthorization}).
 *
 * @throws {HttpError} 401 `invalid_client` for Basic credentials that are not
 * base64 of `id:secret`.
 */
export function readBasicCredentials(request: Request): ClientCredentials {
  const authorization = request.headers.get("authorization") ?? "";
  const encoded = BASIC.exec(authorization)?.[1];
  if (encoded === undefined || encoded.length > 4 * MAX_CREDENTIAL_LENGTH) {
    throw invalidClient("Invalid Basic credentials: expected base64 of client_id:client_secret");
  }
  let decoded: string;
  try {
    decoded = new TextDecoder("utf-8", { fatal: true }).decode(
      Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0)),
    );
  } catch {
    throw invalidClient("Invalid Basic credentials: expected base64 of client_id:client_secret");
  }
  const colon = decoded.indexOf(":");
  if (colon <= 0) {
    throw invalidClient("Invalid Basic credentials: expected client_id:client_secret");
  }
  return {
    method: "client_secret_basic",
    id: formDecode(decoded.slice(0, colon)),
    secret: formDecode(decoded.slice(colon + 1)),
  };
}

/**
 * The `client_secret_post` credentials of a form body, or `undefined` when it
 * has neither `client_id` nor `client_secret`.
 *
 * @throws {SyntaxError} when only one of them is given, or either is repeated.
 */
export function parseFormCredentials(form: URLSearchParams): ClientCredentials | undefined {
  const ids = form.getAll("client_id");
  const secrets = form.getAll("client_secret");
  if (ids.length === 0 && secrets.length === 0) return undefined;
  if (ids.length > 1 || secrets.length > 1) {
    throw new SyntaxError('"client_id" or "client_secret" is given more than once');
  }
  if (ids.length === 0 || secrets.length === 0) {
    throw new SyntaxError('"client_id" and "client_secret" go together');
  }
  if (ids[0].length > MAX_CREDENTIAL_LENGTH || secrets[0].length > MAX_CREDENTIAL_LENGTH) {
    throw new SyntaxError('"client_id" or "client_secret" is too long');
  }
  return { method: "client_secret_post", id: ids[0], secret: secrets[0] };
}

/**
 * RFC 6749 section 5.2's error for an HTTP error: `invalid_client` (401, with
 * a Basic challenge to a client that sent Basic credentials) for credentials that do not authenticate,
 * `unauthorized_client` (400) for a client that may not use the endpoint,
 * `temporarily_unavailable` or `server_error` for keygate's own troubles, and
 * `invalid_request` for anything else the caller sent wrong.
 */
export function toOAuthErrorResponse(error: HttpError, method: ClientAuthMethod): Response {
  const headers = new Headers(error.headers);
  // A Bearer challenge is about access tokens, not about this client's credentials.
  headers.delete("www-authenticate");
  headers.set("content-type", "application/json; charset=utf-8");
  let status = error.status;
  let code: string;
  if (status === 401) {
    code = "invalid_client";
    // RFC 6749 section 5.2: a challenge of the scheme the client used, when it used a header.
    if (method === "client_secret_basic") {
      headers.set("www-authenticate", 'Basic realm="keygate", charset="UTF-8"');
    }
  } else if (error.code === "forbidden") {
    status = 400;
    code = "unauthorized_client";
  } else if (status === 429 || status === 503) {
    code = "temporarily_unavailable";
  } else if (status >= 500) {
    code = "server_error";
  } else {
    code = "invalid_request";
  }
  const body = JSON.stringify({ error: code, error_description: error.message });
  return new Response(body, { status, headers });
}
