/** The upstream forwarding's pure parts: the path, the query and the error text it logs. */
import assert from "node:assert/strict";
import { toSafeErrorText, toUpstreamPathOf, toUpstreamQuery } from "../../src/http/upstream.ts";

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
