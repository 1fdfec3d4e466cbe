import assert from "node:assert/strict";
import { HttpError } from "../src/http/errors.ts";
import { parseRequestPath } from "../src/http/paths.ts";

const pathOf = (url: string) => parseRequestPath(new URL("https://k.test" + url).pathname);

Deno.test("parseRequestPath() marks any spelling of a secure segment as secure", () => {
  for (
    const url of [
      "/api/secure/x",
      "/api/%73ecure/x",
      "/api/Secure/x",
      "/api/SECURE/x",
      "//secure//",
      "/x/../secure/",
      "/x/%2e%2e/secure/y",
      "/api/secure",
      "/api/secure/",
    ]
  ) {
    assert.equal(pathOf(url).secure, true, url);
  }
});

Deno.test("parseRequestPath() does not mark look-alikes as secure", () => {
  for (const url of ["/api/insecure/x", "/api/secured/x", "/api/userservice/tokens", "/"]) {
    assert.equal(pathOf(url).secure, false, url);
  }
});

Deno.test("parseRequestPath() collapses slashes, dot segments and a trailing slash", () => {
  assert.equal(pathOf("//api///userservice/tokens/").path, "/api/userservice/tokens");
  assert.equal(pathOf("/api/./x/../userservice/tokens").path, "/api/userservice/tokens");
  assert.equal(pathOf("/../..").path, "/");
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
    const url of [
      "/api/secure%2Fx",
      "/api%2fsecure/x",
      "/a%5Csecure",
      "/a%00b",
      "/a%252Fb",
      "/a%zz",
    ]
  ) {
    assert.throws(() => pathOf(url), (error: HttpError) => {
      assert.equal(error.status, 400);
      assert.equal(error.code, "invalid_path");
      return true;
    }, url);
  }
});
