import assert from "node:assert/strict";
import { parseAuthRequest } from "../../src/formats/auth_request.ts";

const KEY = "0f8fad5b-d9cb-469f-a165-70867728950e";

Deno.test("parseAuthRequest() reads the JSON shape", () => {
  const body = JSON.stringify({
    auth_request: { user: { email: "A@b.org", password: "pw" }, api_key: KEY },
  });
  assert.deepEqual(parseAuthRequest(body, "json"), {
    email: "A@b.org",
    password: "pw",
    apiKey: KEY,
  });
});

Deno.test("parseAuthRequest() reads JSON with single quotes and keys in any order", () => {
  const body =
    `{'api_key': '${KEY}', 'auth_request': {'user': {'password': 'pw', 'email': 'a@b'}}}`;
  assert.deepEqual(parseAuthRequest(body, "json"), { email: "a@b", password: "pw", apiKey: KEY });
});

Deno.test("parseAuthRequest() takes api_key beside auth_request, and refuses two different ones", () => {
  const beside = `{"auth_request":{"user":{"email":"a@b","password":"p"}},"api_key":"${KEY}"}`;
  assert.equal(parseAuthRequest(beside, "json").apiKey, KEY);
  const same =
    `{"auth_request":{"user":{"email":"a@b","password":"p"},"api_key":"${KEY.toUpperCase()}"},"api_key":"${KEY}"}`;
  assert.equal(parseAuthRequest(same, "json").apiKey, KEY.toUpperCase());
  const different =
    `{"auth_request":{"user":{"email":"a@b","password":"p"},"api_key":"x"},"api_key":"${KEY}"}`;
  assert.throws(() => parseAuthRequest(different, "json"), /api_key" is given twice/);
});

Deno.test("parseAuthRequest() refuses non-string JSON values", () => {
  for (
    const user of [
      { email: 1, password: "p" },
      { email: "a@b", password: 123 },
      { email: ["a@b"], password: "p" },
      { email: "a@b", password: { $gt: "" } },
      { email: null, password: "p" },
    ]
  ) {
    assert.throws(
      () => parseAuthRequest(JSON.stringify({ auth_request: { user } }), "json"),
      /must be a string/,
    );
  }
});

Deno.test("parseAuthRequest() refuses duplicate JSON keys", () => {
  const body = `{"auth_request":{"user":{"email":"a@b","email":"c@d","password":"p"}}}`;
  assert.throws(() => parseAuthRequest(body, "json"), /duplicate key "email"/);
});

Deno.test("parseAuthRequest() ignores __proto__ and constructor keys", () => {
  const body =
    `{"__proto__":{"auth_request":{"user":{"email":"x","password":"y"}}},"auth_request":{"constructor":{"a":1},"user":{"email":"a@b","password":"p","__proto__":{"admin":true}}}}`;
  const parsed = parseAuthRequest(body, "json");
  assert.deepEqual(parsed, { email: "a@b", password: "p" });
  assert.equal(({} as Record<string, unknown>).admin, undefined);
  assert.throws(
    () =>
      parseAuthRequest(
        `{"__proto__":{"auth_request":{"user":{"email":"x","password":"y"}}}}`,
        "json",
      ),
    /expected an object "auth_request"/,
  );
});

Deno.test("parseAuthRequest() reads XML as clients write it", () => {
  const body = `<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\r\n` +
    `<auth_request>\r\n  <api_key>${KEY}</api_key>\r\n  <user>\r\n` +
    `    <password><![CDATA[ 0123 <&> ]]></password>\r\n    <email>a&amp;b&#233;@x.org</email>\r\n` +
    `  </user>\r\n</auth_request>\r\n`;
  assert.deepEqual(parseAuthRequest(body, "xml"), {
    email: "a&bé@x.org",
    password: " 0123 <&> ",
    apiKey: KEY,
  });
});

Deno.test("parseAuthRequest() keeps XML values exactly as sent", () => {
  const body =
    `<auth_request><user><email>a@b</email><password> 0123 </password></user><api_key>123</api_key></auth_request>`;
  assert.deepEqual(parseAuthRequest(body, "xml"), {
    email: "a@b",
    password: " 0123 ",
    apiKey: "123",
  });
});

Deno.test("parseAuthRequest() refuses XML of any other shape", () => {
  const user = "<user><email>a@b</email><password>p</password></user>";
  const cases: [string, RegExp][] = [
    [`<other>${user}</other>`, /expected root element "auth_request"/],
    [`<auth_request>${user}</auth_request><x/>`, /expected root element/],
    [`<auth_request>${user}${user}</auth_request>`, /is given more than once/],
    [
      `<auth_request><user><email>a</email><email>b</email><password>p</password></user></auth_request>`,
      /is given more than once/,
    ],
    [`<auth_request>${user}<extra>1</extra></auth_request>`, /unexpected element <extra>/],
    [`<auth_request><user><email>a@b</email></user></auth_request>`, /missing element/],
    [
      `<auth_request><user><email><b>a</b></email><password>p</password></user></auth_request>`,
      /must contain text/,
    ],
    [`<auth_request>text${user}</auth_request>`, /must contain elements, not text/],
    [`<auth_request>${user}`, /Cannot parse XML/],
    [`<!DOCTYPE x [<!ENTITY e "x">]><auth_request>${user}</auth_request>`, /DOCTYPE/],
  ];
  for (const [body, message] of cases) {
    assert.throws(() => parseAuthRequest(body, "xml"), message, body);
  }
});

Deno.test("parseAuthRequest() does not echo the body when XML is not well-formed", () => {
  const body =
    `<auth_request><user><email>a@b</email><password>s3cr3t<pw</password></user></auth_request>`;
  assert.throws(() => parseAuthRequest(body, "xml"), (error: Error) => {
    assert.match(error.message, /^Cannot parse XML: not well-formed at line 1, column \d+$/);
    assert.ok(!error.message.includes("pw"), error.message);
    return true;
  });
});
