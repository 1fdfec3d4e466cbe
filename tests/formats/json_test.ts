import assert from "node:assert/strict";
import fc from "fast-check";
import { findDuplicateKey, MAX_JSON_DEPTH, parseJson } from "../../src/formats/json.ts";

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

Deno.test("findDuplicateKey() ends a // comment at every JSON5 line terminator", () => {
  for (const end of ["\n", "\r", "\u2028", "\u2029"]) {
    const text = `{"password":"a", // note${end}"password":"b"}`;
    assert.throws(() => parseJson(text), /duplicate key "password"/);
    assert.equal(findDuplicateKey(text), "password");
  }
});

Deno.test("findDuplicateKey() reads a JSON5 name by code point, as JSON5 does", () => {
  assert.equal(findDuplicateKey(`{\u{1d49c}:1,\u{1d49c}:2}`), "\u{1d49c}");
  assert.equal(findDuplicateKey(`{\u{1d49c}x:1,\u{1d49e}x:2}`), undefined);
  assert.deepEqual(parseJson(`{\u{1d49c}x:1,\u{1d49e}x:2}`), { "\u{1d49c}x": 1, "\u{1d49e}x": 2 });
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
        // The repeat spelled as JSON, with every character escaped, single-quoted, or with a
        // comment and blanks before its colon.
        const escaped = Array.from(
          { length: key.length },
          (_, n) => `\\u${key.charCodeAt(n).toString(16).padStart(4, "0")}`,
        ).join("");
        for (
          const spelling of [
            `${JSON.stringify(key)}:`,
            `"${escaped}":`,
            `'${escaped}':`,
            `${JSON.stringify(key)} /* c */\r\n :`,
          ]
        ) {
          const repeated = `${text.slice(0, -1)},${spelling}0}`;
          assert.equal(findDuplicateKey(repeated), key);
        }
      },
    ),
  );
});

Deno.test("parseJson() reads U+2028 and U+2029 in JSON5 strings as they are, and warns nowhere", () => {
  const warnings: unknown[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => warnings.push(args);
  try {
    assert.deepEqual(parseJson("{'a': 'x\u2028y', b: \"\u2029\"}"), { a: "x\u2028y", b: "\u2029" });
    // A backslash before one is a line continuation: nothing.
    assert.deepEqual(parseJson("{'a': 'x\\\u2028y'}"), { a: "xy" });
    // Outside strings it ends a // comment (a quote in the comment opens no string).
    assert.deepEqual(parseJson("{// it's\u2028 a: 'q\u2028'}"), { a: "q\u2028" });
    assert.deepEqual(parseJson("{/* ' */ a: '\u2029', \u2028b: 1}"), { a: "\u2029", b: 1 });
    assert.throws(() => parseJson("{a: '\u2028', 'a': 2}"), /duplicate key "a"/);
  } finally {
    console.warn = warn;
  }
  assert.deepEqual(warnings, []);
});
