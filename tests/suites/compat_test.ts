/**
 * Compatibility suite: what GlobalGiving API clients really send, over real
 * TLS, and what they read back. One case per behaviour in the README's
 * "Compatibility" section.
 */
import assert from "node:assert/strict";
import { createTestApp, type TestApp } from "../_helpers/test_app.ts";
import { startTlsServer, type TlsServer } from "../_helpers/tls_server.ts";

const EMAIL = "partner@example.org";
const PASSWORD = "p@ss <word> & more";

interface Fixture {
  app: TestApp;
  server: TlsServer;
  apiKey: string;
  /** fetch() against the TLS server. */
  call(path: string, init?: RequestInit): Promise<Response>;
  /** POSTs a token request and returns the response. */
  token(body: string, headers?: Record<string, string>, path?: string): Promise<Response>;
  [Symbol.asyncDispose](): Promise<void>;
}

async function setup(): Promise<Fixture> {
  const app = await createTestApp();
  const userId = await app.addUser(EMAIL, PASSWORD);
  const apiKey = await app.createKey(userId);
  const server = await startTlsServer(app.handler);
  const call = (path: string, init: RequestInit = {}) =>
    fetch(server.origin + path, { ...init, client: server.client });
  return {
    app,
    server,
    apiKey,
    call,
    token: (body, headers = {}, path = "/api/userservice/tokens") =>
      call(path, { method: "POST", body, headers }),
    async [Symbol.asyncDispose]() {
      await server.close();
      app.close();
    },
  };
}

const jsonBody = (apiKey: string, password = PASSWORD) =>
  JSON.stringify({ auth_request: { user: { email: EMAIL, password }, api_key: apiKey } });

const xmlBody = (apiKey: string) =>
  `<?xml version="1.0" encoding="UTF-8"?><auth_request><user><email>${EMAIL}</email>` +
  `<password><![CDATA[${PASSWORD}]]></password></user><api_key>${apiKey}</api_key></auth_request>`;

const XML_TOKEN = /<auth_response><access_token>([a-z0-9]{40})<\/access_token><\/auth_response>$/;

/** Reads a token from a 200 response in either format. */
async function readToken(response: Response): Promise<string> {
  const text = await response.text();
  assert.equal(response.status, 200, text);
  if (response.headers.get("content-type") === "application/json; charset=utf-8") {
    return JSON.parse(text).auth_response.access_token;
  }
  assert.equal(response.headers.get("content-type"), "application/xml; charset=utf-8");
  const token = XML_TOKEN.exec(text)?.[1];
  assert.ok(token, text);
  return token;
}

/** What a client reads from an error: status, format, and error[0]. */
async function readError(response: Response, format: "json" | "xml") {
  assert.equal(response.headers.get("content-type"), `application/${format}; charset=utf-8`);
  const text = await response.text();
  if (format === "json") {
    const { error_response } = JSON.parse(text);
    assert.equal(error_response.status, String(response.status));
    assert.ok(Array.isArray(error_response.errors.error));
    return error_response.errors.error[0] as { error_code: string; error_message: string };
  }
  assert.match(
    text,
    new RegExp(
      `^<\\?xml[^>]*\\?><error_response><status>${response.status}</status><errors><error>`,
    ),
  );
  return {
    error_code: /<error_code>([^<]*)<\/error_code>/.exec(text)![1],
    error_message: /<error_message>([^<]*)<\/error_message>/.exec(text)![1],
  };
}

// 1. Request format from Content-Type, independent of Accept.

Deno.test("[compat] Content-Type parameters are ignored", async () => {
  await using f = await setup();
  const token = await readToken(
    await f.token(jsonBody(f.apiKey), { "content-type": "application/json;charset=utf-8" }),
  );
  assert.match(token, /^[a-z0-9]{40}$/);
});

Deno.test("[compat] text/xml and application/xml bodies are accepted", async () => {
  await using f = await setup();
  await readToken(await f.token(xmlBody(f.apiKey), { "content-type": "text/xml" }));
  await readToken(
    await f.token(xmlBody(f.apiKey), { "content-type": "application/xml; charset=UTF-8" }),
  );
});

Deno.test("[compat] JSON body without Content-Type is accepted", async () => {
  await using f = await setup();
  // fetch() adds text/plain to a string body; send bytes so no Content-Type goes out.
  const response = await f.call("/api/userservice/tokens", {
    method: "POST",
    body: new TextEncoder().encode("\n  " + jsonBody(f.apiKey)),
  });
  await readToken(response);
});

Deno.test("[compat] XML body without Content-Type is accepted", async () => {
  await using f = await setup();
  const response = await f.call("/api/userservice/tokens", {
    method: "POST",
    body: new TextEncoder().encode(xmlBody(f.apiKey)),
  });
  await readToken(response);
});

Deno.test("[compat] any other declared Content-Type gets 415 in the Accept format", async () => {
  await using f = await setup();
  const response = await f.token(jsonBody(f.apiKey), {
    "content-type": "text/plain",
    accept: "application/json",
  });
  assert.equal(response.status, 415);
  assert.equal((await readError(response, "json")).error_code, "unsupported_media_type");
  assert.equal(await f.app.store.countRows("tokens"), 0);
});

// 2. JSON as the documentation writes it.

Deno.test("[compat] JSON with single quotes, as the documentation shows it, is accepted", async () => {
  await using f = await setup();
  const body =
    `{'auth_request':{'user':{'email':'${EMAIL}','password':'${PASSWORD}'},'api_key':'${f.apiKey}'}}`;
  await readToken(await f.token(body, { "content-type": "application/json" }));
});

Deno.test("[compat] JSON keys in any order are accepted", async () => {
  await using f = await setup();
  const body = `{"auth_request":{"api_key":"${f.apiKey}","user":{"password":${
    JSON.stringify(PASSWORD)
  },"email":"${EMAIL}"}}}`;
  await readToken(await f.token(body, { "content-type": "application/json" }));
});

Deno.test("[compat] api_key inside auth_request, beside it, or on the query string", async () => {
  await using f = await setup();
  const user = { email: EMAIL, password: PASSWORD };
  const json = { "content-type": "application/json" };
  await readToken(
    await f.token(JSON.stringify({ auth_request: { user, api_key: f.apiKey } }), json),
  );
  await readToken(
    await f.token(JSON.stringify({ auth_request: { user }, api_key: f.apiKey }), json),
  );
  await readToken(
    await f.token(
      JSON.stringify({ auth_request: { user } }),
      json,
      `/api/userservice/tokens?api_key=${f.apiKey}`,
    ),
  );
  assert.equal(await f.app.store.countRows("tokens"), 3);
});

Deno.test("[compat] api_key in two places with different values gets 400", async () => {
  await using f = await setup();
  const other = "11111111-1111-4111-8111-111111111111";
  const user = { email: EMAIL, password: PASSWORD };
  const headers = { "content-type": "application/json", accept: "application/json" };
  for (
    const [body, path] of [
      [JSON.stringify({ auth_request: { user, api_key: f.apiKey }, api_key: other }), ""],
      [JSON.stringify({ auth_request: { user, api_key: f.apiKey } }), `?api_key=${other}`],
    ]
  ) {
    const response = await f.token(body, headers, `/api/userservice/tokens${path}`);
    assert.equal(response.status, 400);
    assert.match(
      (await readError(response, "json")).error_message,
      /api_key is given twice|api_key" is given twice/,
    );
  }
  assert.equal(await f.app.store.countRows("tokens"), 0);
});

// 3. XML as clients write it.

Deno.test("[compat] XML declaration with single or double quotes, with or without standalone, or none", async () => {
  await using f = await setup();
  const rest =
    `<auth_request><user><email>${EMAIL}</email><password><![CDATA[${PASSWORD}]]></password></user>` +
    `<api_key>${f.apiKey}</api_key></auth_request>`;
  for (
    const declaration of [
      `<?xml version='1.0' encoding='UTF-8'?>`,
      `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`,
      `<?xml version='1.0' standalone='no'?>`,
      ``,
    ]
  ) {
    await readToken(await f.token(declaration + rest, { "content-type": "application/xml" }));
  }
});

Deno.test("[compat] indented XML with CRLFs and elements in any order is accepted", async () => {
  await using f = await setup();
  const body = `<?xml version="1.0"?>\r\n<auth_request>\r\n\t<api_key>${f.apiKey}</api_key>\r\n` +
    `\t<user>\r\n\t\t<password><![CDATA[${PASSWORD}]]></password>\r\n\t\t<email>${EMAIL}</email>\r\n` +
    `\t</user>\r\n</auth_request>\r\n`;
  await readToken(await f.token(body, { "content-type": "application/xml" }));
});

Deno.test("[compat] a password wrapped in CDATA is taken as written", async () => {
  await using f = await setup();
  // PASSWORD holds <, > and &: only CDATA lets it stand unescaped.
  await readToken(await f.token(xmlBody(f.apiKey), { "content-type": "application/xml" }));
});

Deno.test("[compat] XML entities &lt; &amp; &#233; are decoded", async () => {
  await using f = await setup();
  const userId = await f.app.addUser("rené@example.org", "a<b&c");
  const apiKey = await f.app.createKey(userId);
  const body =
    `<auth_request><user><email>ren&#233;@example.org</email><password>a&lt;b&amp;c</password>` +
    `</user><api_key>${apiKey}</api_key></auth_request>`;
  await readToken(await f.token(body, { "content-type": "application/xml" }));
});

Deno.test("[compat] values are taken exactly as sent: never trimmed, never numbers", async () => {
  await using f = await setup();
  const userId = await f.app.addUser("digits@example.org", " 0123 ");
  const apiKey = await f.app.createKey(userId);
  const xml =
    `<auth_request><user><email>digits@example.org</email><password> 0123 </password></user>` +
    `<api_key>${apiKey}</api_key></auth_request>`;
  await readToken(await f.token(xml, { "content-type": "application/xml" }));
  const trimmed = xml.replace("<password> 0123 </password>", "<password>0123</password>");
  assert.equal((await f.token(trimmed, { "content-type": "application/xml" })).status, 401);
  const json =
    `{"auth_request":{"user":{"email":"digits@example.org","password":" 0123 "},"api_key":"${apiKey}"}}`;
  await readToken(await f.token(json, { "content-type": "application/json" }));
});

// 4. Response format from Accept.

Deno.test("[compat] the axios/Angular default Accept gets JSON", async () => {
  await using f = await setup();
  const response = await f.token(jsonBody(f.apiKey), {
    "content-type": "application/json",
    accept: "application/json, text/plain, */*",
  });
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  await readToken(response);
});

Deno.test("[compat] JSON wins wherever it is listed, unless XML has a higher q-value", async () => {
  await using f = await setup();
  const formatFor = async (accept: string) => {
    const response = await f.token(jsonBody(f.apiKey), {
      "content-type": "application/json",
      accept,
    });
    await response.body?.cancel();
    return response.headers.get("content-type");
  };
  assert.equal(await formatFor("text/html, application/json"), "application/json; charset=utf-8");
  assert.equal(
    await formatFor("application/json;q=0.5, application/xml"),
    "application/xml; charset=utf-8",
  );
});

Deno.test("[compat] Accept: application/xml with a JSON body gets XML", async () => {
  await using f = await setup();
  for (const accept of ["application/xml", "text/xml"]) {
    const response = await f.token(jsonBody(f.apiKey), {
      "content-type": "application/json",
      accept,
    });
    assert.equal(response.headers.get("content-type"), "application/xml; charset=utf-8");
    await readToken(response);
  }
});

Deno.test("[compat] no Accept, or only */*, gets XML", async () => {
  await using f = await setup();
  for (const headers of [{}, { accept: "*/*" }] as Record<string, string>[]) {
    const response = await f.token(jsonBody(f.apiKey), {
      "content-type": "application/json",
      ...headers,
    });
    assert.equal(response.headers.get("content-type"), "application/xml; charset=utf-8");
    await readToken(response);
  }
});

Deno.test("[compat] an Accept that offers neither format gets 406 with an error body", async () => {
  await using f = await setup();
  const response = await f.token(jsonBody(f.apiKey), {
    "content-type": "application/json",
    accept: "text/html",
  });
  assert.equal(response.status, 406);
  assert.equal((await readError(response, "xml")).error_code, "not_acceptable");
  assert.equal(await f.app.store.countRows("tokens"), 0);
});

Deno.test("[compat] a .json or .xml path suffix overrides Accept", async () => {
  await using f = await setup();
  const json = await f.token(jsonBody(f.apiKey), {
    "content-type": "application/json",
    accept: "application/xml",
  }, "/api/userservice/tokens.json");
  assert.equal(json.headers.get("content-type"), "application/json; charset=utf-8");
  await readToken(json);
  const xml = await f.token(jsonBody(f.apiKey), {
    "content-type": "application/json",
    accept: "application/json",
  }, "/api/userservice/tokens.xml");
  assert.equal(xml.headers.get("content-type"), "application/xml; charset=utf-8");
  await readToken(xml);
});

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
