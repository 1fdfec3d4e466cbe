/** The issue-12 suites' app: a test app with a user, key and token, and forward-auth calls. */
import type { ForwardAuthHeader } from "../../src/http/context.ts";
import { BASE, issueToken } from "./requests.ts";
import { createTestApp } from "./test_app.ts";

export const VERIFY = `${BASE}/api/userservice/verify`;
export const JSON_ACCEPT = { accept: "application/json" };

export async function setup(
  options: { forwardAuthHeader?: ForwardAuthHeader; upstream?: URL } = {},
) {
  const app = await createTestApp({
    forwardAuthHeader: options.forwardAuthHeader,
    upstream: options.upstream && { url: options.upstream, timeoutMs: 5000 },
  });
  const userId = await app.addUser("alice@example.org", "correct horse");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "correct horse", apiKey);
  return { app, userId, apiKey, token };
}

export function verify(app: { handler: (r: Request) => Promise<Response> }, headers: HeadersInit) {
  return app.handler(new Request(VERIFY, { headers }));
}
