/**
 * toPrefixEnd(): the upper bound of a prefix's range, which both backends' deletions read
 * their counters through (the contract's "deleteUser() forgets …" test pins the range).
 *
 * @module
 */
import assert from "node:assert/strict";
import { toPrefixEnd } from "../../src/store/prefix_end.ts";

Deno.test("toPrefixEnd() grows the last code point that can grow", () => {
  assert.equal(toPrefixEnd("portal-login:ab:"), "portal-login:ab;");
  assert.equal(toPrefixEnd("a\u{10FFFF}"), "b");
  assert.equal(toPrefixEnd("a\uD7FF"), "a\uE000");
  assert.equal(toPrefixEnd("a\uFFFF"), "a\u{10000}", "past U+FFFF, into the supplementary planes");
  assert.throws(() => toPrefixEnd(""), RangeError);
  assert.throws(() => toPrefixEnd("\u{10FFFF}"), RangeError);
});
