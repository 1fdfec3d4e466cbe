import assert from "node:assert/strict";
import {
  generateApiKey,
  generateToken,
  hashSecret,
  isTokenShaped,
  normalizeApiKey,
  TOKEN_LENGTH,
  toKeyPrefix,
} from "../../src/auth/credentials.ts";

Deno.test("generateToken() returns 40 characters of [a-z0-9]", () => {
  for (let i = 0; i < 200; i++) assert.match(generateToken(), /^[a-z0-9]{40}$/);
  assert.equal(TOKEN_LENGTH, 40);
});

Deno.test("generateToken() never repeats and uses the whole alphabet", () => {
  const tokens = new Set(Array.from({ length: 1000 }, generateToken));
  assert.equal(tokens.size, 1000);
  const seen = new Set([...tokens].join(""));
  assert.equal(seen.size, 36);
});

Deno.test("generateApiKey() returns a lowercase UUID v4", () => {
  const key = generateApiKey();
  assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

Deno.test("normalizeApiKey() accepts any letter case and refuses other shapes", () => {
  const key = generateApiKey();
  assert.equal(normalizeApiKey(key.toUpperCase()), key);
  assert.equal(normalizeApiKey(key), key);
  assert.equal(normalizeApiKey(key.slice(1)), undefined);
  assert.equal(normalizeApiKey(` ${key.slice(1)}`), undefined);
  assert.equal(normalizeApiKey("x".repeat(36)), undefined);
  assert.equal(normalizeApiKey(""), undefined);
});

Deno.test("isTokenShaped() accepts only 40 characters of [a-z0-9]", () => {
  assert.equal(isTokenShaped(generateToken()), true);
  assert.equal(isTokenShaped(generateToken().toUpperCase()), false);
  assert.equal(isTokenShaped(generateToken() + "a"), false);
  assert.equal(isTokenShaped("a".repeat(39) + "-"), false);
});

Deno.test("hashSecret() is SHA-256 of the UTF-8 text", () => {
  const digest = hashSecret("abc");
  assert.equal(digest.byteLength, 32);
  assert.equal(
    Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
});

Deno.test("toKeyPrefix() keeps the first 8 characters", () => {
  assert.equal(toKeyPrefix("0123abcd-0000-4000-8000-000000000000"), "0123abcd");
});
