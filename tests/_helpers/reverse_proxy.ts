/**
 * Runs a real reverse proxy (nginx or Caddy) from the configuration in
 * docs/deploy.md in front of a real keygate in proxy mode.
 */
import assert from "node:assert/strict";
import { generateSelfSigned } from "../../src/platform/tls.ts";

/** Whether `command` is on PATH. */
export function hasCommand(command: string): boolean {
  try {
    return new Deno.Command("sh", { args: ["-c", `command -v ${command}`], stdout: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** The first fenced block of `language` in docs/deploy.md. */
export function readDeployBlock(language: string): string {
  const text = Deno.readTextFileSync(new URL("../../docs/deploy.md", import.meta.url));
  const match = new RegExp("```" + language + "\\n([\\s\\S]*?)```").exec(text);
  assert.ok(match, `docs/deploy.md has a ${language} block`);
  return match[1];
}

/** Waits until something accepts TCP connections on the port. */
export async function waitForPort(port: number, child: Deno.ChildProcess): Promise<void> {
  let exited = false;
  child.status.then(() => exited = true);
  for (let attempt = 0; attempt < 200 && !exited; attempt++) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
  throw new Error(`nothing listens on port ${port}`);
}

/** A self-signed certificate for 127.0.0.1 in files, for the proxy. */
export async function writeCertificate(dir: string) {
  const { cert, key } = await generateSelfSigned();
  Deno.writeTextFileSync(`${dir}/proxy-cert.pem`, cert);
  Deno.writeTextFileSync(`${dir}/proxy-key.pem`, key, { mode: 0o600 });
  return { cert, certFile: `${dir}/proxy-cert.pem`, keyFile: `${dir}/proxy-key.pem` };
}

/** Who answers a body over the limits: nginx itself (its outer limit), or keygate through Caddy. */
export type OversizeAnswer = "proxy" | "keygate";

/**
 * Through the proxy at `origin`: gets a token (sending a forged
 * `X-Forwarded-For` and any `extraHeaders`), makes a secure request with it,
 * and checks that bodies over the limits get 413, every time, from
 * `oversize` (a declared 100 KB body and a chunked one, several times each:
 * a proxy whose limit races keygate's early 413 answers 502 now and then).
 * Returns the secure response for further checks.
 */
export async function exerciseThroughProxy(
  origin: string,
  client: Deno.HttpClient,
  login: { email: string; password: string; apiKey: string; extraHeaders?: HeadersInit },
  oversize: OversizeAnswer,
): Promise<Response> {
  const issued = await fetch(`${origin}/api/userservice/tokens`, {
    client,
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json",
      // A client trying to pose as another address.
      "x-forwarded-for": "198.51.100.66",
      ...Object.fromEntries(new Headers(login.extraHeaders)),
    },
    body: JSON.stringify({
      auth_request: {
        user: { email: login.email, password: login.password },
        api_key: login.apiKey,
      },
    }),
  });
  assert.equal(issued.status, 200);
  assert.equal(issued.headers.get("content-type"), "application/json; charset=utf-8");
  const token = (await issued.json()).auth_response.access_token;
  assert.match(token, /^[a-z0-9]{40}$/);

  const current = await fetch(
    `${origin}/api/secure/userservice/tokens/current?api_key=${login.apiKey}&api_token=${token}`,
    { client },
  );
  assert.equal(current.status, 200);
  const text = await current.text();
  assert.match(text, new RegExp(`<email>${login.email}</email>`));

  for (let i = 0; i < 10; i++) {
    for (const chunked of [false, true]) {
      const huge = await fetch(`${origin}/api/userservice/tokens`, {
        client,
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: chunked ? chunksOf(100_000, 16_384) : "x".repeat(100_000),
      });
      const body = await huge.text();
      const what = `${chunked ? "chunked" : "declared"} body ${i}: ${huge.status} ${body}`;
      assert.equal(huge.status, 413, what);
      if (oversize === "keygate") {
        assert.equal(huge.headers.get("content-type"), "application/json; charset=utf-8", what);
        assert.equal(
          JSON.parse(body).error_response.errors.error[0].error_code,
          "request_too_large",
          what,
        );
      } else {
        // The proxy's own page: the body never reached keygate.
        assert.doesNotMatch(body, /request_too_large/, what);
      }
    }
  }
  return new Response(text, { status: current.status, headers: current.headers });
}

/** `size` bytes of "x" as a stream of `chunk`-byte pieces: a body without `Content-Length`. */
function chunksOf(size: number, chunk: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= size) return controller.close();
      const length = Math.min(chunk, size - sent);
      sent += length;
      controller.enqueue(new TextEncoder().encode("x".repeat(length)));
    },
  });
}
