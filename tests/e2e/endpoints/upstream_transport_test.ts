/** `--upstream` transport: streaming, 502/504, encodings, real TLS, TRACE, a proxy chain. */
import assert from "node:assert/strict";
import { gunzipSync, gzipSync } from "node:zlib";
import { assertError, BASE, jsonAuthRequest } from "../../_helpers/requests.ts";
import { createTestApp, type TestApp } from "../../_helpers/test_app.ts";
import { startTlsServer, testCertificate } from "../../_helpers/tls_server.ts";
import { setup, startUpstream } from "../../_helpers/upstream_server.ts";

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
