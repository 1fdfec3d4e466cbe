import assert from "node:assert/strict";
import { parseXml } from "../../src/formats/xml.ts";
import { CONTENT_TYPES, toDocument, toResponse } from "../../src/http/respond.ts";

const XML_HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>';

Deno.test("toDocument() writes XML with a declaration, nesting, repeated arrays and escaping", () => {
  const xml = toDocument("xml", "error_response", {
    status: "400",
    errors: {
      error: [{ error_code: "a", error_message: `<&>"'` }, { error_code: "b", error_message: "" }],
    },
  });
  assert.equal(
    xml,
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><error_response><status>400</status>' +
      "<errors><error><error_code>a</error_code><error_message>&lt;&amp;&gt;&quot;&apos;</error_message></error>" +
      "<error><error_code>b</error_code><error_message></error_message></error></errors></error_response>",
  );
  // What it writes, the hardened parser reads back to the same values.
  const parsed = parseXml(xml) as Record<string, unknown>;
  assert.deepEqual(parsed, {
    error_response: [{
      status: ["400"],
      errors: [{
        error: [{ error_code: ["a"], error_message: [`<&>"'`] }, {
          error_code: ["b"],
          error_message: [""],
        }],
      }],
    }],
  });
});

Deno.test("toDocument() writes JSON as { root: body }", () => {
  assert.equal(
    toDocument("json", "token_info", { email: "a@b", expires_in: 5 }),
    '{"token_info":{"email":"a@b","expires_in":5}}',
  );
});

Deno.test("toResponse() sets the exact content type", async () => {
  const response = toResponse("xml", "x", { a: 1 }, { status: 201 });
  assert.equal(response.status, 201);
  assert.equal(response.headers.get("content-type"), CONTENT_TYPES.xml);
  assert.equal(
    await response.text(),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><x><a>1</a></x>',
  );
});

Deno.test("toDocument() replaces characters XML cannot carry, so any message stays well-formed", () => {
  const xml = toDocument("xml", "error_response", { message: "a\u0001b\u0000c\uFFFEd\uD800e\tf" });
  assert.equal(
    xml,
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><error_response><message>' +
      "a\uFFFDb\uFFFDc\uFFFDd\uFFFDe\tf</message></error_response>",
  );
  assert.deepEqual(parseXml(xml), {
    error_response: [{ message: ["a\uFFFDb\uFFFDc\uFFFDd\uFFFDe\tf"] }],
  });
});

Deno.test("toDocument() writes plain ASCII, numbers and booleans as they are, escapes the rest", () => {
  const cases: [string | number | boolean, string][] = [
    ["a@example.org 2026-11-24T04:10:31.396Z ~!#$%()*+,-./:;=?[]^_`{|}", ""],
    [42, ""],
    [true, ""],
    ["tab\there", ""],
    ["it's", "it&apos;s"],
    ['say "x"', "say &quot;x&quot;"],
    ["é€😀", ""],
    ["\u0000\u001f", "\uFFFD\uFFFD"],
  ];
  for (const [value, escaped] of cases) {
    assert.equal(toDocument("xml", "v", value), `${XML_HEAD}<v>${escaped || String(value)}</v>`);
  }
});
