/**
 * Compatibility suite: what GlobalGiving API clients really send, over real
 * TLS, and what they read back. One case per behaviour in the README's
 * "Compatibility" section.
 */
import assert from "node:assert/strict";
import {
  EMAIL,
  jsonBody,
  PASSWORD,
  readError,
  readToken,
  setup,
  xmlBody,
} from "../_helpers/compat_fixture.ts";

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
