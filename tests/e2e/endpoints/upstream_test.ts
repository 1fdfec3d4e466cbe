import assert from "node:assert/strict";
import { gunzipSync, gzipSync } from "node:zlib";
import type { UpstreamOptions } from "../../../src/http/context.ts";
import { toSafeErrorText, toUpstreamPathOf, toUpstreamQuery } from "../../../src/http/upstream.ts";
import { assertError, BASE, issueToken, jsonAuthRequest } from "../../_helpers/requests.ts";
import { createTestApp, type TestApp } from "../../_helpers/test_app.ts";
import { startTlsServer, testCertificate } from "../../_helpers/tls_server.ts";

/** What the test upstream saw of one request. */
interface Seen {
  method: string;
  path: string;
  search: string;
  headers: Headers;
  body: string;
}

type UpstreamHandler = (request: Request, seen: Seen) => Response | Promise<Response>;

/** A real HTTP backend on 127.0.0.1 and a free port that records what it receives. */
function startUpstream(respond: UpstreamHandler = () => new Response("ok")) {
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

async function setup(upstream: Omit<UpstreamOptions, "timeoutMs"> & { timeoutMs?: number }) {
  const app = await createTestApp({ upstream: { timeoutMs: 5000, ...upstream } });
  const userId = await app.addUser("alice@example.org", "pw");
  const apiKey = await app.createKey(userId);
  const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
  return { app, userId, apiKey, token, keyId: (await app.store.listApiKeys(userId))[0].id };
}

const CLIENT = { remoteAddr: { hostname: "203.0.113.9" } };

Deno.test("toUpstreamPathOf() sends the canonical path, re-encoded so it decodes the same", () => {
  assert.equal(toUpstreamPathOf("/api//%73ecure/items"), "/api/secure/items");
  assert.equal(toUpstreamPathOf("/api/secure/a%20b%27c/x.json"), "/api/secure/a%20b'c/x.json");
  assert.equal(toUpstreamPathOf("/api/items/"), "/api/items/");
  assert.equal(
    toUpstreamPathOf("/api/%C3%A9t%C3%A9/y", { allowUnicode: true }),
    "/api/%C3%A9t%C3%A9/y",
  );
  assert.equal(toUpstreamPathOf("/"), "/");
  for (const refused of ["/api/a%2Fb", "/api/a;b", "/api/a%3Bb", "/x/../y", "/api/%C3%A9"]) {
    assert.throws(() => toUpstreamPathOf(refused), /invalid_path|Cannot route/, refused);
  }
});

Deno.test("toSafeErrorText() leaves URLs (and the credentials in their query) out of the log", () => {
  const error = new TypeError(
    "error sending request for url (http://127.0.0.1:9/x?api_key=SECRETKEY&api_token=SECRETTOKEN)",
  );
  assert.equal(toSafeErrorText(error), "TypeError: error sending request for url (<url>");
  assert.equal(toSafeErrorText("HTTPS://h/a?b=c and more"), "<url> and more");
  assert.equal(toSafeErrorText(new Error("x".repeat(400))).length, 300);
});

Deno.test("toUpstreamQuery() drops credential parameters in any spelling and keeps the rest as sent", () => {
  assert.equal(
    toUpstreamQuery("?a=1&api_key=k&API_TOKEN=t&access%5Ftoken=x&b=%20+", true),
    "?a=1&b=%20+",
  );
  assert.equal(toUpstreamQuery("?api_key=k", true), "");
  assert.equal(toUpstreamQuery("?api_key=k", false), "?api_key=k");
  assert.equal(toUpstreamQuery("", true), "");
});

Deno.test("[e2e] --upstream forwards a secure request without credentials, with the caller's identity", async () => {
  const upstream = startUpstream(async (request, seen) => {
    seen.body = await request.text();
    const headers = new Headers({ "content-type": "text/plain", "x-upstream": "yes" });
    headers.append("set-cookie", "a=1");
    headers.append("set-cookie", "b=2");
    headers.set("connection", "x-upstream-hop");
    headers.set("x-upstream-hop", "1");
    return new Response(`donated ${seen.body.length} bytes`, { status: 201, headers });
  });
  const { app, userId, apiKey, token, keyId } = await setup({ url: upstream.url });
  try {
    const url = `${BASE}/api/secure/givingservice/donations?api_key=${apiKey}&api_token=${token}` +
      `&project=42&access_token=${token}`;
    const response = await app.handler(
      new Request(url, {
        method: "POST",
        body: '{"amount":"25.00"}',
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${token}`,
          "x-api-key": apiKey,
          "x-keygate-user": "999",
          "X-Keygate-Email": "mallory@example.org",
          "x-keygate-anything": "forged",
          "x-request-id": "forged",
          "x-forwarded-for": "10.0.0.1",
          connection: "x-client-hop",
          "x-client-hop": "1",
          "x-custom": "kept",
        },
      }),
      CLIENT,
    );
    assert.equal(response.status, 201);
    assert.equal(response.headers.get("content-type"), "text/plain");
    assert.equal(await response.text(), "donated 18 bytes");
    assert.equal(response.headers.get("x-upstream"), "yes");
    assert.deepEqual(response.headers.getSetCookie(), ["a=1", "b=2"]);
    assert.equal(response.headers.get("x-upstream-hop"), null);
    assert.match(response.headers.get("strict-transport-security")!, /max-age/);

    assert.equal(upstream.seen.length, 1);
    const [seen] = upstream.seen;
    assert.equal(seen.method, "POST");
    assert.equal(seen.path, "/api/secure/givingservice/donations");
    assert.equal(seen.search, "?project=42");
    assert.equal(seen.body, '{"amount":"25.00"}');
    const headers = seen.headers;
    assert.equal(headers.get("authorization"), null);
    assert.equal(headers.get("x-api-key"), null);
    assert.equal(headers.get("x-keygate-user"), String(userId));
    assert.equal(headers.get("x-keygate-email"), "alice@example.org");
    assert.equal(headers.get("x-keygate-key-id"), String(keyId));
    assert.equal(headers.get("x-keygate-anything"), null);
    assert.equal(headers.get("x-request-id"), response.headers.get("x-request-id"));
    // Outside proxy mode a client-sent chain is replaced: only the TCP peer is known.
    assert.equal(headers.get("x-forwarded-for"), "203.0.113.9");
    assert.equal(headers.get("x-forwarded-proto"), "https");
    assert.equal(headers.get("x-forwarded-host"), "keygate.test");
    assert.equal(headers.get("x-client-hop"), null);
    assert.equal(headers.get("x-custom"), "kept");
    assert.equal(headers.get("content-type"), "application/json");
    for (const [name, value] of headers) {
      assert.ok(!value.includes(token) && !value.includes(apiKey), `${name} leaks a credential`);
    }
  } finally {
    app.close();
    await upstream.close();
  }
});

Deno.test("[e2e] --upstream forwards the canonical path behind the upstream's base path", async () => {
  const upstream = startUpstream();
  const base = new URL("/backend/", upstream.url);
  const { app, apiKey, token } = await setup({ url: base, hideCredentials: false });
  try {
    const response = await app.handler(
      new Request(`${BASE}/api//%73ecure/Items/a%20b%21c.json?api_key=${apiKey}&q=1`, {
        headers: { authorization: `Bearer ${token}` },
      }),
    );
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "ok");
    const [seen] = upstream.seen;
    assert.equal(seen.path, "/backend/api/secure/Items/a%20b!c.json");
    // With hideCredentials off the credentials pass through.
    assert.equal(seen.search, `?api_key=${apiKey}&q=1`);
    assert.equal(seen.headers.get("authorization"), `Bearer ${token}`);
  } finally {
    app.close();
    await upstream.close();
  }
});

Deno.test("[e2e] --upstream forwards other paths on the API key alone, and never keygate's own", async () => {
  const upstream = startUpstream();
  const { app, userId, apiKey, token } = await setup({ url: upstream.url });
  try {
    const ok = await app.handler(new Request(`${BASE}/api/public/projects?api_key=${apiKey}`));
    assert.equal(ok.status, 200);
    assert.equal(await ok.text(), "ok");
    assert.equal(upstream.seen[0].path, "/api/public/projects");
    assert.equal(upstream.seen[0].search, "");
    assert.equal(upstream.seen[0].headers.get("x-keygate-user"), String(userId));

    // Refused by the gate: nothing reaches the upstream.
    await assertError(
      await app.handler(new Request(`${BASE}/api/public/projects`)),
      401,
      "invalid_api_key",
    );
    await assertError(
      await app.handler(new Request(`${BASE}/api/secure/x?api_key=${apiKey}`)),
      401,
      "invalid_token",
    );
    // keygate's own paths are answered by keygate, never forwarded.
    const own = [
      `/api/userservice/nothing?api_key=${apiKey}`,
      `/API/UserService/tokens?api_key=${apiKey}`,
      `/api/secure/userservice/other?api_key=${apiKey}&api_token=${token}`,
    ];
    for (const path of own) {
      await assertError(await app.handler(new Request(BASE + path)), 404, "not_found");
    }
    assert.equal((await app.handler(new Request(`${BASE}/healthz`))).status, 200);
    const current = await app.handler(
      new Request(
        `${BASE}/api/secure/userservice/tokens/current?api_key=${apiKey}&api_token=${token}`,
      ),
    );
    assert.equal(current.status, 200);
    await current.body?.cancel();
    assert.equal(upstream.seen.length, 1);
  } finally {
    app.close();
    await upstream.close();
  }
});

Deno.test("[e2e] --upstream streams the request and the response without buffering them", async () => {
  const encoder = new TextEncoder();
  let firstChunkArrived!: () => void;
  const arrived = new Promise<void>((resolve) => firstChunkArrived = resolve);
  let clientReadFirst!: () => void;
  const clientRead = new Promise<void>((resolve) => clientReadFirst = resolve);
  const upstream = startUpstream(async (request) => {
    const reader = request.body!.getReader();
    const first = await reader.read();
    assert.equal(new TextDecoder().decode(first.value), "part one;");
    firstChunkArrived();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      rest += new TextDecoder().decode(r.value);
    }
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(encoder.encode(`got [${rest}];`));
        await clientRead; // the second half waits until the client has read the first
        controller.enqueue(encoder.encode("end"));
        controller.close();
      },
    });
    return new Response(body);
  });
  const { app, apiKey, token } = await setup({ url: upstream.url });
  // The second half of the body is sent only once the upstream has the first.
  const requestBody = new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(encoder.encode("part one;"));
      await arrived;
      controller.enqueue(encoder.encode("part two"));
      controller.close();
    },
  });
  const guard = (what: string) =>
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`${what}: the proxy buffered`)), 5000)
    );
  try {
    const response = await Promise.race([
      app.handler(
        new Request(`${BASE}/api/secure/upload?api_key=${apiKey}&api_token=${token}`, {
          method: "PUT",
          body: requestBody,
          duplex: "half",
        } as RequestInit),
      ),
      guard("request"),
    ]);
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    const first = await Promise.race([reader.read(), guard("response")]);
    assert.equal(new TextDecoder().decode(first.value), "got [part two];");
    clientReadFirst();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      rest += new TextDecoder().decode(r.value);
    }
    assert.equal(rest, "end");
  } finally {
    app.close();
    await upstream.close();
  }
});

Deno.test("[e2e] --upstream answers 502 bad_gateway in the caller's format when the upstream is down", async () => {
  const down = startUpstream();
  await down.close();
  // Credentials are passed on, so the failed fetch's URL holds them: the log must scrub it.
  const { app, apiKey, token } = await setup({ url: down.url, hideCredentials: false });
  try {
    const path = `/api/secure/x?api_key=${apiKey}&api_token=${token}`;
    const json = await app.handler(
      new Request(BASE + path, { headers: { accept: "application/json" } }),
    );
    assert.equal(
      await assertError(json, 502, "bad_gateway", "json"),
      "The upstream service is unavailable",
    );
    await assertError(await app.handler(new Request(BASE + path)), 502, "bad_gateway", "xml");
    const logged = app.logLines.map((line) => JSON.parse(line));
    const failure = logged.find((line) => line.msg === "upstream request failed");
    assert.ok(failure);
    assert.ok(!JSON.stringify(logged).includes(token), "the token is logged");
    assert.ok(!JSON.stringify(logged).includes(apiKey), "the API key is logged");
  } finally {
    app.close();
  }
});

Deno.test("[e2e] --upstream answers 504 gateway_timeout when the upstream is slow", async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  const upstream = startUpstream(async () => {
    await released;
    return new Response("too late");
  });
  const { app, apiKey } = await setup({ url: upstream.url, timeoutMs: 50 });
  try {
    const response = await app.handler(
      new Request(`${BASE}/api/public/slow.json?api_key=${apiKey}`),
    );
    await assertError(response, 504, "gateway_timeout", "json");
  } finally {
    release();
    app.close();
    await upstream.close();
  }
});

Deno.test("[e2e] --upstream asks for identity encoding and passes an encoded body on as sent", async () => {
  const upstream = startUpstream(() =>
    new Response(new Uint8Array(gzipSync("compressed anyway")), {
      headers: { "content-encoding": "gzip", "content-type": "text/plain" },
    })
  );
  const { app, apiKey } = await setup({ url: upstream.url });
  try {
    const response = await app.handler(
      new Request(`${BASE}/api/public/x?api_key=${apiKey}`, {
        headers: { "accept-encoding": "gzip, br" },
      }),
    );
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-encoding"), "gzip");
    const bytes = new Uint8Array(await response.arrayBuffer());
    assert.equal(gunzipSync(bytes).toString(), "compressed anyway");
    assert.equal(upstream.seen[0].headers.get("accept-encoding"), "identity");
  } finally {
    app.close();
    await upstream.close();
  }
});

Deno.test("[server] --upstream behind real TLS: HEAD and 204 pass without a body", async () => {
  const upstream = startUpstream((request) =>
    request.method === "DELETE"
      ? new Response(null, { status: 204 })
      : new Response("body", { headers: { "x-length": "4" } })
  );
  let app: TestApp | undefined;
  try {
    const context = await setup({ url: upstream.url });
    app = context.app;
    await using server = await startTlsServer(app.handler);
    const head = await fetch(`${server.origin}/api/public/thing?api_key=${context.apiKey}`, {
      method: "HEAD",
      client: server.client,
    });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("x-length"), "4");
    assert.equal(await head.text(), "");
    const deleted = await fetch(
      `${server.origin}/api/secure/thing/1?api_key=${context.apiKey}&api_token=${context.token}`,
      { method: "DELETE", client: server.client },
    );
    assert.equal(deleted.status, 204);
    assert.equal(await deleted.text(), "");
    assert.deepEqual(upstream.seen.map((s) => s.method), ["HEAD", "DELETE"]);
    assert.equal(upstream.seen[1].headers.get("x-forwarded-for"), "127.0.0.1");
  } finally {
    app?.close();
    await upstream.close();
  }
});

Deno.test("[server] --upstream refuses TRACE with 405 and forwards nothing", async () => {
  const upstream = startUpstream();
  const { app, apiKey } = await setup({ url: upstream.url });
  try {
    // `new Request()` cannot carry TRACE, so speak HTTP/1.1 over a real TLS connection.
    await using server = await startTlsServer(app.handler);
    const connection = await Deno.connectTls({
      hostname: "127.0.0.1",
      port: Number(new URL(server.origin).port),
      caCerts: [(await testCertificate()).cert],
    });
    await connection.write(
      new TextEncoder().encode(
        `TRACE /api/public/x?api_key=${apiKey} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      ),
    );
    const text = await new Response(connection.readable).text();
    assert.match(text, /^HTTP\/1.1 405/);
    assert.match(text, /<error_code>method_not_allowed<\/error_code>/);
    assert.equal(upstream.seen.length, 0);
  } finally {
    app.close();
    await upstream.close();
  }
});

Deno.test("[e2e] --upstream behind a trusted proxy passes the proxy's chain, the proxy hop and https on", async () => {
  const upstream = startUpstream();
  const app = await createTestApp({
    upstream: { url: upstream.url, timeoutMs: 5000 },
    proxy: { trustedProxies: ["10.0.0.0/8"] },
  });
  try {
    const userId = await app.addUser("alice@example.org", "pw");
    const apiKey = await app.createKey(userId);
    const proxyInfo = { remoteAddr: { hostname: "10.0.0.2" } };
    // Proxy mode listens on plain HTTP: the URL keygate sees is http://.
    const login = await app.handler(
      new Request("http://keygate.test/api/userservice/tokens", {
        method: "POST",
        body: jsonAuthRequest("alice@example.org", "pw"),
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          "x-api-key": apiKey,
          "x-forwarded-proto": "https",
          "x-forwarded-for": "203.0.113.9",
        },
      }),
      proxyInfo,
    );
    assert.equal(login.status, 200);
    const token = (await login.json()).auth_response.access_token;
    const response = await app.handler(
      new Request(`http://keygate.test/api/secure/items?api_key=${apiKey}&api_token=${token}`, {
        headers: { "x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.9" },
      }),
      proxyInfo,
    );
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "ok");
    assert.equal(upstream.seen.length, 1);
    const headers = upstream.seen[0].headers;
    assert.equal(headers.get("x-forwarded-proto"), "https");
    assert.equal(headers.get("x-forwarded-for"), "203.0.113.9, 10.0.0.2");
    assert.equal(headers.get("x-keygate-user"), String(userId));
  } finally {
    app.close();
    await upstream.close();
  }
});
