import assert from "node:assert/strict";
import {
  generateApiKey,
  generateToken,
  SECRET_SCANNER_CONTEXT_PATTERN,
  SECRET_SCANNER_PATTERN,
} from "../../src/auth/credentials.ts";

const pattern = new RegExp(SECRET_SCANNER_PATTERN, "g");
// JavaScript has no leading (?i); RE2, PCRE and Python do.
const context = new RegExp(SECRET_SCANNER_CONTEXT_PATTERN.replace(/^\(\?i\)/, ""), "gi");

Deno.test("SECRET_SCANNER_PATTERN matches every emitted key and token, whole, in context", () => {
  for (let i = 0; i < 200; i++) {
    const key = generateApiKey();
    const token = generateToken();
    const text = `GET /api/secure/x?api_key=${key}&api_token=${token} HTTP/1.1`;
    assert.deepEqual(text.match(pattern), [key, token]);
    assert.deepEqual([...text.matchAll(context)].map((m) => m[1]), [key, token]);
    const json = `{"auth_response":{"access_token":"${token}"}}`;
    assert.deepEqual([...json.matchAll(context)].map((m) => m[1]), [token]);
    assert.deepEqual([...`X-Api-Key: ${key}`.matchAll(context)].map((m) => m[1]), [key]);
  }
});

Deno.test("SECRET_SCANNER_PATTERN does not match cut or lengthened values", () => {
  const token = generateToken();
  for (const text of [token.slice(1), `${token}a`, `x${token}`, "token"]) {
    assert.equal(text.match(pattern), null, text);
  }
  assert.equal(`Bearer ${token.slice(1)}`.match(context), null);
  // Documented limits: any UUID v4 and any 40-character [a-z0-9] word match too.
  assert.ok(pattern.test("da39a3ee5e6b4b0d3255bfef95601890afd80709"));
});

Deno.test("docs/security.md publishes both patterns verbatim", async () => {
  const readme = await Deno.readTextFile(new URL("../../docs/security.md", import.meta.url));
  assert.ok(
    readme.includes(SECRET_SCANNER_PATTERN),
    "docs/security.md lacks SECRET_SCANNER_PATTERN",
  );
  assert.ok(
    readme.includes(SECRET_SCANNER_CONTEXT_PATTERN),
    "docs/security.md lacks SECRET_SCANNER_CONTEXT_PATTERN",
  );
});
