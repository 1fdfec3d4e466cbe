/** `--upstream` forwarding: secure requests without credentials, with the identity; paths. */
import assert from "node:assert/strict";
import { assertError, BASE } from "../../_helpers/requests.ts";
import { CLIENT, setup, startUpstream } from "../../_helpers/upstream_server.ts";

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
