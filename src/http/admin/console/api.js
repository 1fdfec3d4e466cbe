/**
 * The admin API from the console: the operator token lives in
 * sessionStorage (gone when the tab closes) and travels only in the
 * Authorization header, never in a cookie, so a cross-site page cannot make
 * the browser send it.
 *
 * @module
 */

const TOKEN_KEY = "keygate.operatorToken";

/** An error answer of the admin API. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function readToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function saveToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** Calls the admin API; resolves to the JSON body, rejects with {@link ApiError}. */
export async function api(method, path, body, token = readToken()) {
  const headers = { accept: "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(`/admin/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
  } catch {
    throw new ApiError(0, "network_error", "Cannot reach keygate: is the tunnel still open?");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = data.error ?? {};
    const retry = response.headers.get("retry-after");
    const message = (error.message ?? `HTTP ${response.status}`) +
      (retry ? ` (retry in ${retry} s)` : "");
    throw new ApiError(response.status, error.code ?? "error", message);
  }
  return data;
}

/** A query string from the defined values of an object. */
export function toQuery(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(name, String(value));
  }
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}
