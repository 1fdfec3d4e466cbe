import assert from "node:assert/strict";
import fc from "fast-check";
import { parseTokenRequest } from "../../src/http/token_request.ts";

/** What a form body says the token is, by the WHATWG form parser itself. */
function byFormParser(text: string): string | Error {
  const values = new URLSearchParams(text).getAll("token");
  if (values.length !== 1 || values[0] === "" || values[0].length > 1024) return new Error();
  return values[0];
}

Deno.test("parseTokenRequest() reads a form body as the form parser does, fast path or not", () => {
  const units = fc.constantFrom(..."aZ09._~-+%2Fé&=", "%41", "%zz", "token=");
  fc.assert(
    fc.property(fc.string({ unit: units, maxLength: 40 }), (value) => {
      for (const text of [`token=${value}`, value]) {
        const expected = byFormParser(text);
        if (expected instanceof Error) {
          assert.throws(() => parseTokenRequest(text, "form"), SyntaxError, text);
        } else {
          assert.equal(parseTokenRequest(text, "form"), expected, text);
        }
      }
    }),
    { numRuns: 3000 },
  );
  assert.equal(parseTokenRequest("token=abc123", "form"), "abc123");
  assert.equal(parseTokenRequest("token=a%2Bb+c", "form"), "a+b c");
  assert.throws(() => parseTokenRequest("token=a&token=a", "form"), /more than once/);
});
