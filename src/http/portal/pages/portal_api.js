// The portal's JSON API as the pages call it: same origin, JSON bodies, the session's CSRF
// token on every change once signed in. Errors reject with the API's message.

let csrfToken = "";

/** Remembers the session's CSRF token (from sign-in or GET /session). */
export function setCsrfToken(token) {
  csrfToken = token ?? "";
}

/** Calls `method path` with `body`; resolves to the parsed JSON (or null for 204). */
export async function call(method, path, body) {
  const headers = { accept: "application/json" };
  if (method !== "GET") {
    headers["content-type"] = "application/json";
    if (csrfToken !== "") headers["x-csrf-token"] = csrfToken;
  }
  const response = await fetch(`/api/portal/v1${path}`, {
    method,
    headers,
    body: method === "GET" ? undefined : JSON.stringify(body ?? {}),
    credentials: "same-origin",
  });
  if (response.status === 204) return null;
  const json = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(json.error?.message ?? `Request failed (${response.status})`);
    error.status = response.status;
    throw error;
  }
  return json;
}
