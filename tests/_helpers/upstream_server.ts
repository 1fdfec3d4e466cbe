/** A real HTTP backend that records what it receives, and keygate forwarding to it (--upstream). */
import type { UpstreamOptions } from "../../src/http/context.ts";
import { issueToken } from "./requests.ts";
import { createTestApp } from "./test_app.ts";

/** What the test upstream saw of one request. */
export interface Seen {
  method: string;
  path: string;
  search: string;
  headers: Headers;
  body: string;
}

export type UpstreamHandler = (request: Request, seen: Seen) => Response | Promise<Response>;

/** A real HTTP backend on 127.0.0.1 and a free port that records what it receives. */
export function startUpstream(respond: UpstreamHandler = () => new Response("ok")) {
  const seen: Seen[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const url = new URL(request.url);
    const entry: Seen = {
      method: request.method,
      path: url.pathname,
      search: url.search,
      headers: request.headers,
      body: "",
    };
    seen.push(entry);
    return respond(request, entry);
  });
  return {
    seen,
    url: new URL(`http://127.0.0.1:${server.addr.port}`),
    close: () => server.shutdown(),
  };
}

export async function setup(upstream: Omit<UpstreamOptions, "timeoutMs"> & { timeoutMs?: number }) {
  const app = await createTestApp({ upstream: { timeoutMs: 5000, ...upstream } });
  const userId = await app.addUser("alice@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  return { app, userId, apiKey, token, keyId: (await app.store.listApiKeys(userId))[0].id };
}

export const CLIENT = { remoteAddr: { hostname: "203.0.113.9" } };
