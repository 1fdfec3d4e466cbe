/**
 * API keys and access tokens: generation, normalisation and hashing.
 * Pure functions, no storage.
 *
 * Both kinds of secret are stored only as their SHA-256 digest, which is
 * enough for 122- and 206-bit random values (no salt or slow hash needed),
 * and lets every check be a single indexed lookup.
 *
 * @module
 */
import { createHash, randomBytes } from "node:crypto";

/** An access token: 40 characters of `[a-z0-9]`, about 206 bits of entropy. */
export const TOKEN_LENGTH = 40;
const TOKEN_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
/** The largest multiple of 36 below 256: bytes at or above it are re-drawn to avoid bias. */
const UNBIASED_LIMIT = 252;

/** A lowercase UUID, the shape of every API key. */
const API_KEY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TOKEN = /^[a-z0-9]{40}$/;

/** Length of an API key: a UUID with dashes. */
export const API_KEY_LENGTH = 36;

/** Generates a new API key: a random lowercase UUID v4. */

export function generateApiKey(): string {
  return crypto.randomUUID();
}

/** Generates a new access token from the system CSPRNG, without modulo bias. */
export function generateToken(): string {
  let token = "";
  while (token.length < TOKEN_LENGTH) {
    for (const byte of randomBytes(TOKEN_LENGTH)) {
      if (byte < UNBIASED_LIMIT && token.length < TOKEN_LENGTH) token += TOKEN_ALPHABET[byte % 36];
    }
  }
  return token;
}

/**
 * Normalises an API key as callers send it (any letter case) to the form
 * that is hashed, or `undefined` if it cannot be a key.
 */
export function normalizeApiKey(text: string): string | undefined {
  if (text.length !== API_KEY_LENGTH) return undefined;
  const key = text.toLowerCase();
  return API_KEY.test(key) ? key : undefined;
}

/** Whether `text` has the shape of an access token. */
export function isTokenShaped(text: string): boolean {
  return TOKEN.test(text);
}

/** SHA-256 of a secret's UTF-8 text: the only form in which secrets are stored. */
export function hashSecret(secret: string): Uint8Array {
  return createHash("sha256").update(secret).digest();
}

/** The first 8 characters of an API key, shown in listings to tell keys apart. */
export function toKeyPrefix(apiKey: string): string {
  return apiKey.slice(0, 8);
}

/**
 * For secret scanners: matches keygate API keys and access tokens as they are
 * emitted. It is RE2-compatible (no look-around). Keys are plain UUID v4s, so
 * the first branch matches every lowercase UUID v4, and the second matches any
 * 40-character word of lowercase letters and digits (SHA-1 hex digests too).
 * See docs/security.md for a narrower, context-bound variant.
 */
export const SECRET_SCANNER_PATTERN =
  "\\b(?:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|[a-z0-9]{40})\\b";

/**
 * The same secrets where a client puts them: after `api_key`, `X-Api-Key`,
 * `api_token`, `access_token` or `Bearer` (any letter case), with up to four
 * quote, space, `:`, `=` or `>` characters between. Group 1 is the secret.
 */
export const SECRET_SCANNER_CONTEXT_PATTERN =
  "(?i)(?:api_key|x-api-key|api_token|access_token|bearer)[\"'\\s:=>]{1,4}" +
  "([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|[a-z0-9]{40})\\b";
