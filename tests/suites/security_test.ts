/**
 * The reproductions of issue 12 ("close every path, header and body reading
 * in which keygate and its backends disagree"), each sent as an attacker
 * would: forward-auth, `--upstream` with a recording backend, keygate's own
 * routing, raw bytes on the wire where `fetch` would normalise them.
 */
import assert from "node:assert/strict";
import { assertError, BASE } from "../_helpers/requests.ts";
import { createTestApp } from "../_helpers/test_app.ts";
import { startRawServer, startRecordingBackend } from "../_helpers/raw_http.ts";
import { JSON_ACCEPT, setup, verify } from "../_helpers/security_app.ts";

Deno.test("[issue 12.1] forward-auth, --upstream and routing refuse path parameters", async () => {
  const backend = startRecordingBackend();
  const { app, apiKey } = await setup({ upstream: backend.url });
  await using server = await startRawServer(app.handler);
  try {
    // The reported request: a key only, a secure path behind ";jsessionid=1".
    const answer = await verify(app, {
      "x-original-uri": "/api/secure;jsessionid=1/givingservice/donations",
      "x-api-key": apiKey,
      ...JSON_ACCEPT,
    });
    await assertError(answer, 403, "invalid_path", "json");
    assert.equal(answer.headers.get("x-keygate-user"), null);
    for (const uri of ["/api/public;x=1/secure", "/api/public/..;/secure/x", "/api/%3B/x"]) {
      await assertError(
        await verify(app, { "x-original-uri": uri, "x-api-key": apiKey }),
        403,
        "invalid_path",
      );
    }
    // The same request sent to keygate itself, and through --upstream.
    for (const path of ["/api/secure;jsessionid=1/x", "/api/public;jsessionid=1/x"]) {
      const direct = await server.send(
        `GET ${path}?api_key=${apiKey} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json`,
      );
      assert.equal(direct.status, 400, path);
      assert.equal(
        JSON.parse(direct.body).error_response.errors.error[0].error_code,
        "invalid_path",
      );
    }
    assert.deepEqual(backend.seen, []);
  } finally {
    app.close();
    await backend.close();
  }
});

Deno.test("[issue 12.2] Unicode spellings of secure are refused, never public", async () => {
  const backend = startRecordingBackend();
  const { app, apiKey } = await setup({ upstream: backend.url });
  await using server = await startRawServer(app.handler);
  try {
    const spellings = [
      "/api/%C5%BFecure/donations", // ſ, which case-folds to s
      "/api/%EF%BC%B3%EF%BC%A5%EF%BC%A3%EF%BC%B5%EF%BC%B2%EF%BC%A5/donations", // ＳＥＣＵＲＥ
      "/api/secure%E2%80%8B/donations", // a zero-width space
      "/api/%C3%A9t%C3%A9/donations", // any other non-ASCII, without --unicode-paths
    ];
    for (const uri of spellings) {
      const answer = await verify(app, { "x-original-uri": uri, "x-api-key": apiKey });
      await assertError(answer, 403, "invalid_path");
      assert.equal(answer.headers.get("x-keygate-user"), null, uri);
      const direct = await server.send(`GET ${uri}?api_key=${apiKey} HTTP/1.1\r\nHost: localhost`);
      assert.equal(direct.status, 400, uri);
      assert.match(direct.body, /<error_code>invalid_path<\/error_code>/);
    }
    // Raw UTF-8 bytes in the request line are refused as well.
    const raw = await server.send(
      `GET /api/\u00c5\u00bfecure/x?api_key=${apiKey} HTTP/1.1\r\nHost: localhost`,
    );
    assert.equal(raw.status, 400);
    assert.deepEqual(backend.seen, []);
  } finally {
    app.close();
    await backend.close();
  }
});

Deno.test("[issue 12.2] --unicode-paths admits letters but still refuses secure look-alikes", async () => {
  const backend = startRecordingBackend();
  const app = await createTestApp({
    upstream: { url: backend.url, timeoutMs: 5000 },
    unicodePaths: true,
  });
  const apiKey = await app.createKey(await app.addUser("alice@example.org", "pw"));
  try {
    const ok = await app.handler(new Request(`${BASE}/api/%C3%A9t%C3%A9?api_key=${apiKey}`));
    assert.equal(ok.status, 200);
    assert.equal(await ok.text(), "backend");
    assert.equal(backend.seen[0].path, "/api/%C3%A9t%C3%A9");
    await assertError(
      await app.handler(new Request(`${BASE}/api/%C5%BFecure/x?api_key=${apiKey}`)),
      400,
      "invalid_path",
    );
    // U+FF0F FULLWIDTH SOLIDUS is "/" in NFKC: x／secure is x/secure to a normalising backend.
    await assertError(
      await app.handler(new Request(`${BASE}/api/x%EF%BC%8Fsecure/y?api_key=${apiKey}`)),
      400,
      "invalid_path",
    );
    assert.equal(backend.seen.length, 1);
  } finally {
    app.close();
    await backend.close();
  }
});

Deno.test("[issue 12.3] client headers with _ and forwarding headers never reach the upstream", async () => {
  const backend = startRecordingBackend();
  const { app, userId, apiKey } = await setup({ upstream: backend.url });
  try {
    const response = await app.handler(
      new Request(`${BASE}/api/public/x?api_key=${apiKey}`, {
        headers: {
          "X_Keygate_User": "999",
          "X-Keygate_Email": "mallory@example.org",
          "X-KEYGATE-USER": "998",
          "x_forwarded_for": "10.0.0.1",
          "Forwarded": "for=10.0.0.1;proto=https",
          "X-Real-IP": "10.0.0.2",
          "True-Client-IP": "10.0.0.3",
          "X-Forwarded-Port": "443",
          "X-Forwarded-Prefix": "/admin",
          "X-Request-Id": "forged",
          "X-Custom": "kept",
        },
      }),
      { remoteAddr: { hostname: "203.0.113.9" } },
    );
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "backend");
    const { headers } = backend.seen[0];
    const names = [...headers.keys()];
    assert.deepEqual(names.filter((name) => name.includes("_")), []);
    for (const name of ["forwarded", "x-real-ip", "true-client-ip", "x-forwarded-port"]) {
      assert.equal(headers.get(name), null, name);
    }
    assert.equal(headers.get("x-forwarded-prefix"), null);
    assert.equal(headers.get("x-keygate-user"), String(userId));
    assert.equal(headers.get("x-keygate-email"), "alice@example.org");
    assert.equal(headers.get("x-forwarded-for"), "203.0.113.9");
    assert.notEqual(headers.get("x-request-id"), "forged");
    assert.equal(headers.get("x-custom"), "kept");
  } finally {
    app.close();
    await backend.close();
  }
});

Deno.test("[issue 12.3] routing-override and client-address headers never reach the upstream", async () => {
  // Symfony, Zend and IIS route on X-Original-URL / X-Rewrite-URL instead of the request line:
  // a public path with one of them would reach a secure endpoint on the API key alone.
  const backend = startRecordingBackend();
  const { app, apiKey } = await setup({ upstream: backend.url });
  const forged: Record<string, string> = {
    "X-Original-URL": "/api/secure/donations",
    "X-Rewrite-URL": "/api/secure/donations",
    "X-Original-URI": "/api/secure/donations",
    "X-Original-Method": "DELETE",
    "X-Host": "admin.internal",
    "X-Original-Host": "admin.internal",
    "X-HTTP-Host-Override": "admin.internal",
    "Client-IP": "10.0.0.4",
    "X-Client-IP": "10.0.0.5",
    "X-Cluster-Client-IP": "10.0.0.6",
    "CF-Connecting-IP": "10.0.0.7",
    "Fastly-Client-IP": "10.0.0.8",
  };
  try {
    const response = await app.handler(
      new Request(`${BASE}/api/public/x?api_key=${apiKey}`, {
        headers: { ...forged, "X-Custom": "kept" },
      }),
    );
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "backend");
    const { path, headers } = backend.seen[0];
    assert.equal(path, "/api/public/x");
    for (const name of Object.keys(forged)) assert.equal(headers.get(name), null, name);
    assert.equal(headers.get("x-custom"), "kept");
  } finally {
    app.close();
    await backend.close();
  }
});

Deno.test("[issue 12.4] an absolute-form target sets neither X-Forwarded-Proto nor -Host", async () => {
  const backend = startRecordingBackend();
  const { app, apiKey } = await setup({ upstream: backend.url });
  await using server = await startRawServer(app.handler);
  try {
    const host = `localhost:${server.port}`;
    const response = await server.send(
      `GET http://evil.example/api/public/x?api_key=${apiKey} HTTP/1.1\r\nHost: ${host}`,
    );
    assert.equal(response.status, 200);
    assert.equal(response.body, "backend");
    const { path, headers } = backend.seen[0];
    assert.equal(path, "/api/public/x");
    assert.equal(headers.get("x-forwarded-proto"), "https");
    assert.equal(headers.get("x-forwarded-host"), host);
  } finally {
    app.close();
    await backend.close();
  }
});

Deno.test("[issue 12.5] forward-auth reads the URI header the operator configured", async () => {
  const secure = "/api/secure/donations/1";
  // The documented Caddy block: Caddy sets X-Forwarded-Uri, the client adds X-Original-URI.
  const attack = (apiKey: string) => ({
    "x-forwarded-uri": secure,
    "x-forwarded-method": "GET",
    "x-original-uri": "/api/public",
    "x-api-key": apiKey,
  });
  {
    const { app, apiKey } = await setup(); // default: either, refused when both are sent
    using _ = app;
    const answer = await verify(app, attack(apiKey));
    await assertError(answer, 403, "ambiguous_original_uri");
    assert.equal(answer.headers.get("x-keygate-user"), null);
    // One header alone is read, whichever it is.
    await assertError(
      await verify(app, { "x-forwarded-uri": secure, "x-api-key": apiKey }),
      401,
      "invalid_token",
    );
  }
  {
    const { app, apiKey, token } = await setup({ forwardAuthHeader: "x-forwarded-uri" });
    using _ = app;
    await assertError(await verify(app, attack(apiKey)), 401, "invalid_token");
    const allowed = await verify(app, { ...attack(apiKey), authorization: `Bearer ${token}` });
    assert.equal(allowed.status, 200);
    // A client's X-Original-URI alone is not the original request.
    await assertError(
      await verify(app, { "x-original-uri": "/api/public", "x-api-key": apiKey }),
      400,
      "invalid_request",
    );
  }
  {
    // nginx sets X-Original-URI; a client's X-Forwarded-Uri is ignored.
    const { app, apiKey } = await setup({ forwardAuthHeader: "x-original-uri" });
    using _ = app;
    await assertError(
      await verify(app, {
        "x-original-uri": secure,
        "x-forwarded-uri": "/api/public",
        "x-api-key": apiKey,
      }),
      401,
      "invalid_token",
    );
  }
});
