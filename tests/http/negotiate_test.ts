import assert from "node:assert/strict";
import { HttpError } from "../../src/http/errors.ts";
import { findRequestFormat, negotiateResponseFormat } from "../../src/http/negotiate.ts";

Deno.test("findRequestFormat() reads Content-Type and ignores parameters", () => {
  assert.equal(findRequestFormat("application/json;charset=utf-8", "{}"), "json");
  assert.equal(findRequestFormat("Application/JSON", "{}"), "json");
  assert.equal(findRequestFormat("application/xml", "<a/>"), "xml");
  assert.equal(findRequestFormat("text/xml; charset=UTF-8", "<a/>"), "xml");
});

Deno.test("findRequestFormat() sniffs the first non-blank character without Content-Type", () => {
  assert.equal(findRequestFormat(null, "  \r\n{}"), "json");
  assert.equal(findRequestFormat(null, "\n<a/>"), "xml");
  assert.equal(findRequestFormat("", "<a/>"), "xml");
});

Deno.test("findRequestFormat() refuses other types with 415", () => {
  for (
    const [type, body] of [["text/plain", "{}"], ["application/x-www-form-urlencoded", "a=b"], [
      null,
      "a=b",
    ]] as const
  ) {
    assert.throws(() => findRequestFormat(type, body), (error: HttpError) => {
      assert.equal(error.status, 415);
      assert.equal(error.code, "unsupported_media_type");
      return true;
    });
  }
});

Deno.test("negotiateResponseFormat() defaults to XML", () => {
  assert.equal(negotiateResponseFormat(null), "xml");
  assert.equal(negotiateResponseFormat(""), "xml");
  assert.equal(negotiateResponseFormat("*/*"), "xml");
  assert.equal(negotiateResponseFormat("application/*"), "xml");
});

Deno.test("negotiateResponseFormat() picks JSON wherever application/json is listed", () => {
  assert.equal(negotiateResponseFormat("application/json"), "json");
  assert.equal(negotiateResponseFormat("application/json, text/plain, */*"), "json");
  assert.equal(negotiateResponseFormat("text/plain, */*, application/json"), "json");
  assert.equal(negotiateResponseFormat("application/xml, application/json"), "json");
});

Deno.test("negotiateResponseFormat() lets a higher q-value prefer XML", () => {
  assert.equal(negotiateResponseFormat("application/json;q=0.5, application/xml"), "xml");
  assert.equal(negotiateResponseFormat("application/json;q=0.9, text/xml;q=1"), "xml");
  assert.equal(negotiateResponseFormat("application/xml;q=0.5, application/json;q=0.8"), "json");
  assert.equal(negotiateResponseFormat("text/xml"), "xml");
  assert.equal(negotiateResponseFormat("application/xml, */*"), "xml");
});

Deno.test("negotiateResponseFormat() returns undefined when neither format is acceptable", () => {
  assert.equal(negotiateResponseFormat("text/html"), undefined);
  assert.equal(negotiateResponseFormat("application/json;q=0, application/xml;q=0"), undefined);
  assert.equal(negotiateResponseFormat("*/*;q=0"), undefined);
});
