import assert from "node:assert/strict";
import fc from "fast-check";
import { findDuplicateKey, MAX_JSON_DEPTH, parseJson } from "../src/formats/json.ts";

Deno.test("parseJson() reads strict JSON and falls back to JSON5", () => {
  assert.deepEqual(parseJson(`{"a": "b"}`), { a: "b" });
  assert.deepEqual(parseJson(`{'a': 'b', c: "d", /* note */ }`), { a: "b", c: "d" });
});

Deno.test("parseJson() throws SyntaxError for neither", () => {
  assert.throws(() => parseJson(`{"a": }`), SyntaxError);
  assert.throws(() => parseJson(`<a/>`), SyntaxError);
});

Deno.test("parseJson() refuses nesting deeper than MAX_JSON_DEPTH with SyntaxError", () => {
  const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
  assert.deepEqual(parseJson(`{"a":${nested(MAX_JSON_DEPTH - 1)}}`), {
    a: JSON.parse(nested(MAX_JSON_DEPTH - 1)),
  });
  assert.throws(() => parseJson(`{"a":${nested(MAX_JSON_DEPTH)}}`), SyntaxError);
  assert.throws(() => parseJson(nested(20_000)), /nested deeper than 32 levels/);
});

Deno.test("findDuplicateKey() finds repeats per object only", () => {
  assert.equal(findDuplicateKey(`{"a":1,"a":2}`), "a");
  assert.equal(findDuplicateKey(`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`), undefined);
  assert.equal(findDuplicateKey(`{"a":"\\"a\\":","a":2}`), "a");
  assert.equal(findDuplicateKey(`{'a':1, a: 2}`), "a");
  assert.equal(findDuplicateKey(`{"\\u0061":1,"a":2}`), "a");
  assert.equal(findDuplicateKey(`{"a":1, // "a": 2\n "b": 3}`), undefined);
  assert.equal(findDuplicateKey(`["a", "a"]`), undefined);
});

Deno.test("findDuplicateKey() decodes keys however they are spelled, and only keys", () => {
  assert.equal(findDuplicateKey(`{"\\x61":1,"a":2}`), "a"); // JSON5's escape, double-quoted
  assert.equal(findDuplicateKey(`{"a" \n : 1, 'a'/* c */: 2}`), "a"); // blanks before the colon
  assert.equal(findDuplicateKey(`{"k":"a","a":"a","l":["a","a"]}`), undefined);
});

Deno.test("findDuplicateKey() finds the one repeated key of any JSON object, and none before", () => {
  fc.assert(
    fc.property(
      fc.dictionary(fc.string({ unit: "binary" }), fc.jsonValue({ maxDepth: 3 })),
      fc.nat(),
      (object, pick) => {
        const text = JSON.stringify(object);
        assert.equal(findDuplicateKey(text), undefined);
        const keys = Object.keys(object);
        if (keys.length === 0) return;
        const key = keys[pick % keys.length];
        assert.equal(findDuplicateKey(`${text.slice(0, -1)},${JSON.stringify(key)}:0}`), key);
      },
    ),
  );
});
