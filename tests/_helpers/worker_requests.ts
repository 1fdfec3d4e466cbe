/** Requests to a `--workers N` server, each on a connection of its own, and revocation checks. */
import assert from "node:assert/strict";

export const PASSWORD = "workers test pw";
export const CURRENT = "/api/secure/userservice/tokens/current";

/** One request on a connection of its own; the worker is the request id's prefix. */
export async function fetchFresh(cert: string | undefined, url: string, init: RequestInit = {}) {
  const client = Deno.createHttpClient(cert === undefined ? {} : { caCerts: [cert] });
  try {
    const response = await fetch(url, { ...init, client });
    const body = await response.text();
    const worker = (response.headers.get("x-request-id") ?? "").split("-")[0];
    return { status: response.status, type: response.headers.get("content-type"), body, worker };
  } finally {
    client.close();
  }
}

/** Revokes the token of `headers` by a DELETE of the current token, through whichever worker. */
export function deleteCurrentToken(
  cert: string | undefined,
  url: string,
  headers: Record<string, string>,
): () => Promise<void> {
  return async () => {
    const revoked = await fetchFresh(cert, url, { method: "DELETE", headers });
    assert.equal(revoked.status, 204, revoked.body);
  };
}

/**
 * Has both workers serve the token of `headers` at `url` (so both cache it), revokes it with
 * `revoke` (through one worker, or the admin API on the main thread), and checks that every
 * worker refuses it from the next request on. Returns how many requests were allowed and refused.
 */
export async function assertRevokedOnEveryWorker(
  cert: string | undefined,
  url: string,
  headers: Record<string, string>,
  revoke: () => Promise<void>,
): Promise<{ allowed: number; refused: number }> {
  const allowedBy = new Set<string>();
  let allowed = 0;
  for (let i = 0; i < 200 && allowedBy.size < 2; i++) {
    const response = await fetchFresh(cert, url, { headers });
    assert.equal(response.status, 200, response.body);
    allowedBy.add(response.worker);
    allowed++;
  }
  assert.equal(allowedBy.size, 2, "both workers answered");
  await revoke();
  const refusedBy = new Set<string>();
  let refused = 0;
  for (let i = 0; i < 200 && refusedBy.size < 2; i++) {
    const response = await fetchFresh(cert, url, { headers });
    assert.equal(response.status, 401, `request ${i} after the revocation: ${response.body}`);
    assert.equal(response.type, "application/json; charset=utf-8");
    assert.equal(
      JSON.parse(response.body).error_response.errors.error[0].error_code,
      "invalid_token",
    );
    refusedBy.add(response.worker);
    refused++;
  }
  assert.deepEqual(refusedBy, allowedBy, "both workers refused it");
  return { allowed, refused };
}

export async function issueToken(cert: string, origin: string, email: string, apiKey: string) {
  const response = await fetchFresh(cert, `${origin}/api/userservice/tokens`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({
      auth_request: { user: { email, password: PASSWORD }, api_key: apiKey },
    }),
  });
  assert.equal(response.status, 200, response.body);
  return JSON.parse(response.body).auth_response.access_token as string;
}
