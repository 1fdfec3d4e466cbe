import assert from "node:assert/strict";
import fc from "fast-check";
import { HttpError } from "../../src/http/errors.ts";
import {
  createPathParser,
  parseRequestPath,
  splitRequestTarget,
  toFoldedName,
} from "../../src/http/paths.ts";

const pathOf = (raw: string) => parseRequestPath(raw);

function assertInvalidPath(raw: string, options = {}) {
  assert.throws(() => parseRequestPath(raw, options), (error: HttpError) => {
    assert.ok(error instanceof HttpError, raw);
    assert.equal(error.status, 400, raw);
    assert.equal(error.code, "invalid_path", raw);
    return true;
  }, raw);
}

Deno.test("parseRequestPath() marks any spelling of a secure segment as secure", () => {
  for (
    const raw of [
      "/api/secure/x",
      "/api/%73ecure/x",
      "/api/Secure/x",
      "/api/SECURE/x",
      "//secure//",
      "/api/secure",
      "/api/secure/",
      "/api/secure.json",
      "/api/Secure.anything/x",
    ]
  ) {
    assert.equal(pathOf(raw).secure, true, raw);
  }
});

Deno.test("parseRequestPath() does not mark look-alikes as secure", () => {
  for (const raw of ["/api/insecure/x", "/api/secured/x", "/api/userservice/tokens", "/"]) {
    assert.equal(pathOf(raw).secure, false, raw);
  }
});

Deno.test("parseRequestPath() collapses slashes and notes a trailing slash", () => {
  assert.deepEqual(pathOf("//api///userservice/tokens/"), {
    path: "/api/userservice/tokens",
    secure: false,
    trailingSlash: true,
  });
  assert.equal(pathOf("/").path, "/");
});

Deno.test("parseRequestPath() reads and removes a .json or .xml suffix", () => {
  assert.deepEqual(pathOf("/api/userservice/tokens.json"), {
    path: "/api/userservice/tokens",
    secure: false,
    format: "json",
  });
  assert.equal(pathOf("/api/secure/x.xml").format, "xml");
  assert.equal(pathOf("/api/userservice/tokens").format, undefined);
});

Deno.test("parseRequestPath() refuses encoded separators and bad encodings with 400", () => {
  for (
    const raw of [
      "/api/secure%2Fx",
      "/api%2fsecure/x",
      "/a%5Csecure",
      "/a%00b",
      "/a%252Fb",
      "/a%zz",
      "/a%3Fb",
      "/a%23b",
      "/a%C3",
    ]
  ) {
    assertInvalidPath(raw);
  }
});

Deno.test("parseRequestPath() refuses path parameters, backslashes and dot segments", () => {
  for (
    const raw of [
      "/api/secure;jsessionid=1/x",
      "/api/public;x/secure",
      "/api/%3Bjsessionid",
      "/api/public/..;/secure/x",
      "/api\\secure/x",
      "/x/../secure/",
      "/x/./y",
      "/x/%2e%2E/secure/y",
      "/x/%2e/y",
      "/api/a b",
      "/api/a|b",
      "api/x",
      "",
    ]
  ) {
    assertInvalidPath(raw);
  }
});

Deno.test("parseRequestPath() refuses non-ASCII unless allowed, and secure look-alikes always", () => {
  assertInvalidPath("/api/%C3%A9t%C3%A9");
  assert.equal(
    parseRequestPath("/api/%C3%A9t%C3%A9", { allowUnicode: true }).path,
    "/api/\u00e9t\u00e9",
  );
  for (
    const raw of [
      "/api/%C5%BFecure/x", // ſecure: U+017F folds to s
      "/api/%EF%BC%B3%EF%BC%A5%EF%BC%A3%EF%BC%B5%EF%BC%B2%EF%BC%A5/x", // fullwidth SECURE
      "/api/secure%E2%80%8B/x", // a zero-width space
      "/api/se%C2%ADcure/x", // a soft hyphen
    ]
  ) {
    assertInvalidPath(raw);
    assertInvalidPath(raw, { allowUnicode: true });
  }
  // Characters whose NFKC form is a separator, a parameter, an escape or a dot segment: a backend
  // that normalises the path before splitting it reads "x／secure" as x/secure.
  for (
    const raw of [
      "/api/x%EF%BC%8Fsecure/y", // fullwidth solidus
      "/api/x%EF%BC%BCsecure/y", // fullwidth reverse solidus
      "/api/secure%EF%BC%9Bx/y", // fullwidth semicolon
      "/api/secure%EF%B9%94x/y", // small semicolon
      "/api/%EF%BC%8573ecure/y", // fullwidth percent sign
      "/api/%EF%BC%9Fx/y", // fullwidth question mark
      "/api/%EF%BC%8E%EF%BC%8E/y", // fullwidth ..
    ]
  ) {
    assertInvalidPath(raw, { allowUnicode: true });
  }
  // ASCII spellings a backend would trim or fold are refused too.
  assertInvalidPath("/api/secure%20/x");
  assertInvalidPath("/api/secure::$DATA/x");
  assertInvalidPath("/api/Secure:x");
  assertInvalidPath("/api/secure%20.json");
  // Leading blanks: Java's String.trim() and Spring's AntPathMatcher with trimTokens (CVE-2016-5007).
  assertInvalidPath("/api/%20secure/x");
  assertInvalidPath("/api/%20%20Secure.json");
  // "+" is a space to a form decoder (PHP's urldecode, Python's unquote_plus).
  assertInvalidPath("/api/secure+/x");
  assertInvalidPath("/api/+secure/x");
  assert.equal(pathOf("/api/secure+x/y").secure, false);
});

Deno.test("parseRequestPath() refuses a dot segment left by removing the format suffix", () => {
  assertInvalidPath("/api/x/...json");
  assertInvalidPath("/api/x/..xml");
  assert.equal(pathOf("/api/x/....json").path, "/api/x/...");
});

Deno.test("toFoldedName() reads a segment as a Unicode-aware, case-insensitive backend", () => {
  assert.equal(toFoldedName("\u017Fecure"), "secure");
  assert.equal(toFoldedName("\uFF33\uFF25\uFF23\uFF35\uFF32\uFF25"), "secure");
  assert.equal(toFoldedName("SECURE.json"), "secure");
  assert.equal(toFoldedName("secure. "), "secure");
  assert.equal(toFoldedName(" Secure"), "secure");
  assert.equal(toFoldedName("+secure+"), "secure");
  assert.equal(toFoldedName("SeCuRe:x"), "secure");
  assert.equal(toFoldedName("insecure"), "insecure");
});

Deno.test("splitRequestTarget() takes the path and query as sent, whatever the authority", () => {
  assert.deepEqual(splitRequestTarget("https://h:8443/api/./x?a=1#f"), {
    rawPath: "/api/./x",
    search: "?a=1",
  });
  assert.deepEqual(splitRequestTarget("http://evil.example/api/x"), {
    rawPath: "/api/x",
    search: "",
  });
  assert.deepEqual(splitRequestTarget("/a?"), { rawPath: "/a", search: "" });
  assert.deepEqual(splitRequestTarget("https://h"), { rawPath: "/", search: "" });
});

Deno.test("toFoldedName() reads an ASCII segment as the full Unicode fold does (its fast path)", () => {
  const fullFold = (segment: string) =>
    segment.normalize("NFKC").replace(/[\p{Default_Ignorable_Code_Point}\p{Cf}]/gu, "")
      .toUpperCase().toLowerCase().normalize("NFKC").split(/[.:]/, 1)[0].replaceAll("+", " ")
      .trim();
  fc.assert(
    fc.property(fc.string({ unit: "binary-ascii", maxLength: 24 }), (segment) => {
      assert.equal(toFoldedName(segment), fullFold(segment));
    }),
    { numRuns: 5000 },
  );
  for (const segment of ["Secure:x", "secure \t", " SECURE+", "secure.json", "api", ""]) {
    assert.equal(toFoldedName(segment), fullFold(segment), JSON.stringify(segment));
  }
  assert.equal(toFoldedName("ſecure"), "secure"); // beyond ASCII: the full fold still applies
});

Deno.test("createPathParser() answers as parseRequestPath, remembers within its capacity", () => {
  const read = createPathParser({}, 2);
  const paths = ["/api/secure/x", "/API/Secure/y.json", "/a/b/", "/%61pi/secure"];
  for (const path of paths) assert.deepEqual(read(path), parseRequestPath(path));
  const first = read("/api/secure/x");
  assert.equal(read("/api/secure/x"), first, "a repeated path is the remembered answer");
  assert.ok(Object.isFrozen(first));
  read("/b");
  read("/c"); // the third distinct path: the memory starts over
  assert.notEqual(read("/api/secure/x"), first);
  assert.deepEqual(read("/api/secure/x"), first);
  // Refusals are never remembered: each one throws again.
  for (let i = 0; i < 2; i++) {
    assert.throws(() => read("/x/%2e%2e/secure"), (e: HttpError) => e.code === "invalid_path");
  }
  const unicode = createPathParser({ allowUnicode: true });
  assert.deepEqual(unicode("/caf%C3%A9"), parseRequestPath("/caf%C3%A9", { allowUnicode: true }));
  assert.throws(() => read("/caf%C3%A9"), (e: HttpError) => e.code === "invalid_path");
});
