/**
 * Compatibility suite: what GlobalGiving API clients really send, over real
 * TLS, and what they read back. One case per behaviour in the README's
 * "Compatibility" section.
 */
import assert from "node:assert/strict";
import {
  EMAIL,
  Fixture,
  jsonBody,
  PASSWORD,
  readError,
  readToken,
  setup,
  XML_TOKEN,
} from "../_helpers/compat_fixture.ts";

// 5. Secure-request quirks.

async function currentInfo(f: Fixture, query: string, headers: Record<string, string> = {}) {
  const response = await f.call(`/api/secure/userservice/tokens/current${query}`, { headers });
  return { status: response.status, text: await response.text() };
}

Deno.test("[compat] api_token and api_key are trimmed of surrounding whitespace", async () => {
  await using f = await setup();
  const token = await readToken(
    await f.token(jsonBody(f.apiKey), { "content-type": "application/json" }),
  );
  const { status, text } = await currentInfo(f, `?api_key=%20${f.apiKey}%20&api_token= ${token}`);
  assert.equal(status, 200, text);
  assert.match(text, /<email>partner@example.org<\/email>/);
});

Deno.test("[compat] tokens are [a-z0-9] and work unencoded in a query string", async () => {
  await using f = await setup();
  for (let i = 0; i < 5; i++) {
    const token = await readToken(
      await f.token(jsonBody(f.apiKey), { "content-type": "application/json" }),
    );
    assert.match(token, /^[a-z0-9]{40}$/);
    assert.equal(encodeURIComponent(token), token);
    assert.equal((await currentInfo(f, `?api_key=${f.apiKey}&api_token=${token}`)).status, 200);
  }
});

Deno.test("[compat] the is_test query flag is accepted and ignored", async () => {
  await using f = await setup();
  const token = await readToken(
    await f.token(jsonBody(f.apiKey), { "content-type": "application/json" }),
  );
  for (const flag of ["true", "True", "false"]) {
    assert.equal(
      (await currentInfo(f, `?api_key=${f.apiKey}&api_token=${token}&is_test=${flag}`)).status,
      200,
    );
  }
  await readToken(
    await f.token(
      jsonBody(f.apiKey),
      { "content-type": "application/json" },
      "/api/userservice/tokens?is_test=True",
    ),
  );
});

Deno.test("[compat] a trailing slash is tolerated on any path", async () => {
  await using f = await setup();
  const token = await readToken(
    await f.token(
      jsonBody(f.apiKey),
      { "content-type": "application/json" },
      "/api/userservice/tokens/",
    ),
  );
  const response = await f.call(
    `/api/secure/userservice/tokens/current/?api_key=${f.apiKey}&api_token=${token}`,
  );
  assert.equal(response.status, 200);
  await response.body?.cancel();
  const health = await f.call("/healthz/");
  assert.equal(health.status, 200);
  await health.body?.cancel();
});

Deno.test("[compat] a bodiless GET that says Content-Type: application/json is fine", async () => {
  await using f = await setup();
  const token = await readToken(
    await f.token(jsonBody(f.apiKey), { "content-type": "application/json" }),
  );
  const { status } = await currentInfo(f, `?api_key=${f.apiKey}&api_token=${token}`, {
    "content-type": "application/json",
    accept: "application/json",
  });
  assert.equal(status, 200);
});

// 6. Several live tokens per user.

Deno.test("[compat] a second token does not end the first", async () => {
  await using f = await setup();
  const first = await readToken(
    await f.token(jsonBody(f.apiKey), { "content-type": "application/json" }),
  );
  const second = await readToken(
    await f.token(jsonBody(f.apiKey), { "content-type": "application/json" }),
  );
  assert.notEqual(first, second);
  assert.equal((await currentInfo(f, `?api_key=${f.apiKey}&api_token=${first}`)).status, 200);
  assert.equal((await currentInfo(f, `?api_key=${f.apiKey}&api_token=${second}`)).status, 200);
});

// 7. Errors clients can read.

Deno.test("[compat] every non-2xx answer has an error_response with an error array", async () => {
  await using f = await setup();
  const json = { "content-type": "application/json", accept: "application/json" };
  const cases: [number, string, () => Promise<Response>][] = [
    [400, "invalid_request", () => f.token("{", json)],
    [401, "invalid_credentials", () => f.token(jsonBody(f.apiKey, "wrong"), json)],
    [
      401,
      "invalid_token",
      () => f.call("/api/secure/x", { headers: { accept: "application/json" } }),
    ],
    [
      404,
      "not_found",
      () => f.call(`/api/nowhere?api_key=${f.apiKey}`, { headers: { accept: "application/json" } }),
    ],
    [
      405,
      "method_not_allowed",
      () => f.call("/api/userservice/tokens", { headers: { accept: "application/json" } }),
    ],
    [406, "not_acceptable", () => f.call("/healthz", { headers: { accept: "image/png" } })],
    [413, "request_too_large", () => f.token("{" + " ".repeat(20000) + "}", json)],
    [
      415,
      "unsupported_media_type",
      () => f.token("a=b", { ...json, "content-type": "application/x-www-form-urlencoded" }),
    ],
  ];
  for (const [status, code, send] of cases) {
    const response = await send();
    assert.equal(response.status, status, code);
    const format = status === 406 ? "xml" : "json";
    const error = await readError(response, format);
    assert.equal(error.error_code, code);
    assert.ok(error.error_message.length > 0);
  }
  assert.equal(await f.app.store.countRows("tokens"), 0);
});

// 8. CORS.

Deno.test("[compat] a partner page's CORS preflight gets 204 with its headers reflected", async () => {
  await using f = await setup();
  const response = await f.call("/api/userservice/tokens", {
    method: "OPTIONS",
    headers: {
      origin: "https://partner.example",
      "access-control-request-method": "POST",
      "access-control-request-headers": "Content-Type, Accept, Pragma, Cache-Control",
    },
  });
  assert.equal(response.status, 204);
  assert.equal(response.headers.get("access-control-allow-origin"), "*");
  assert.equal(response.headers.get("access-control-allow-methods"), "GET, POST, DELETE, OPTIONS");
  assert.equal(
    response.headers.get("access-control-allow-headers"),
    "Content-Type, Accept, Pragma, Cache-Control",
  );
  await response.body?.cancel();
});

Deno.test("[compat] actual cross-origin responses carry Access-Control-Allow-Origin", async () => {
  await using f = await setup();
  const response = await f.token(jsonBody(f.apiKey), {
    "content-type": "application/json",
    accept: "application/json",
    origin: "https://partner.example",
    pragma: "no-cache",
    "cache-control": "no-cache",
  });
  assert.equal(response.headers.get("access-control-allow-origin"), "*");
  await readToken(response);
});

// The documentation's curl examples, with only the host changed.

Deno.test({
  name:
    "[compat] curl commands from the GlobalGiving documentation work with only the host changed",
  ignore: !(await hasCurl()),
  async fn() {
    await using f = await setup();
    const { cert } = await (await import("../_helpers/tls_server.ts")).testCertificate();
    const caFile = await Deno.makeTempFile({ suffix: ".pem" });
    await Deno.writeTextFile(caFile, cert);
    const curl = async (...args: string[]) => {
      const output = await new Deno.Command("curl", {
        args: ["-s", "--cacert", caFile, ...args],
        stdout: "piped",
      }).output();
      return new TextDecoder().decode(output.stdout);
    };
    const url = `${f.server.origin}/api/userservice/tokens`;
    try {
      const xml = await curl(
        "-H",
        "Content-Type: application/xml",
        "-H",
        "Accept: application/xml",
        "-X",
        "POST",
        "-d",
        `<?xml version='1.0' encoding='UTF-8'?><auth_request><user><email>${EMAIL}</email><password><![CDATA[${PASSWORD}]]></password></user><api_key>${f.apiKey}</api_key></auth_request>`,
        url,
      );
      assert.match(xml, XML_TOKEN);
      const single = await curl(
        "-H",
        "Content-Type: application/json",
        "-H",
        "Accept: application/json",
        "-X",
        "POST",
        "-d",
        `{'auth_request':{'user':{'email':'${EMAIL}','password':'${PASSWORD}'},'api_key':'${f.apiKey}'}}`,
        url,
      );
      assert.match(JSON.parse(single).auth_response.access_token, /^[a-z0-9]{40}$/);
      const mixed = await curl(
        "-H",
        "Content-Type: application/json",
        "-H",
        "Accept: application/xml",
        "-X",
        "POST",
        "-d",
        jsonBody(f.apiKey),
        url,
      );
      assert.match(mixed, XML_TOKEN);
    } finally {
      await Deno.remove(caFile);
    }
  },
});

async function hasCurl(): Promise<boolean> {
  try {
    return (await new Deno.Command("curl", { args: ["--version"], stdout: "null" }).output())
      .success;
  } catch {
    return false;
  }
}
