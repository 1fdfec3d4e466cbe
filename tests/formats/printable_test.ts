import assert from "node:assert/strict";
import { findUnsafeCharacter } from "../../src/auth/account_rules.ts";
import { toPrintable, UNSAFE_CHARACTERS } from "../../src/formats/printable.ts";

Deno.test("findUnsafeCharacter() names the first control, invisible or bidirectional character", () => {
  assert.equal(findUnsafeCharacter("billing key"), undefined);
  assert.equal(findUnsafeCharacter("clé ключ 請求 😀"), undefined);
  assert.equal(findUnsafeCharacter("ann\u200b@example.org"), "U+200B");
  assert.equal(findUnsafeCharacter("billing\u202etxt.exe"), "U+202E");
  assert.equal(findUnsafeCharacter("a\u061cb\u200ec"), "U+061C");
  assert.equal(findUnsafeCharacter("tag\u{e0041}"), "U+E0041");
  assert.equal(findUnsafeCharacter("lone\ud800"), "U+D800");
  assert.equal(findUnsafeCharacter("no\u00a0break"), "U+00A0");
  assert.equal(findUnsafeCharacter("wide\u3000space"), "U+3000");
  assert.equal(findUnsafeCharacter("esc\x1b"), "U+001B");
  assert.equal(findUnsafeCharacter("line\u2028sep"), "U+2028");
});

Deno.test("toPrintable() escapes invisible and bidirectional characters; JSON keeps its value", () => {
  assert.equal(toPrintable("billing\u202etxt.exe"), String.raw`billing\u202etxt.exe`);
  assert.equal(toPrintable("ann\u200b@x"), String.raw`ann\u200b@x`);
  assert.equal(toPrintable("tag\u{e0041}"), String.raw`tag\udb40\udc41`);
  assert.equal(toPrintable("a\nb"), "a\nb");
  assert.equal(toPrintable("a\nb", false), String.raw`a\u000ab`);
  assert.equal(toPrintable("plain text, clé"), "plain text, clé");
  const value = { label: "a\u202e\u200b\u00a0\u{e0041}\x1b\x9b b" };
  const text = toPrintable(JSON.stringify(value));
  assert.doesNotMatch(text, new RegExp(UNSAFE_CHARACTERS.source.replace("|[^\\S ]", ""), "u"));
  assert.deepEqual(JSON.parse(text), value);
});

Deno.test("the console escapes the same characters as the server (dom.js)", async () => {
  const source = await Deno.readTextFile(
    new URL("../../src/http/admin/console/dom.js", import.meta.url),
  );
  const match = /const UNSAFE_CHARACTERS =\s*\/(.+)\/gu;/.exec(source);
  assert.ok(match, "dom.js declares UNSAFE_CHARACTERS");
  assert.equal(match[1], UNSAFE_CHARACTERS.source);
});
