/**
 * The fuzz suites' requests: fast-check arbitraries of hostile token requests, a test app with
 * one user, and the check that every answer is a 2xx or 4xx in the caller's format.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { parseAuthRequest } from "../../src/formats/auth_request.ts";
import type { Format } from "../../src/formats/format.ts";
import type { ThrottleRules } from "../../src/auth/throttle.ts";
import { BASE, issueToken, secureGet } from "./requests.ts";
import { createTestApp, type TestApp } from "./test_app.ts";

export const EMAIL = "alice@example.org";
export const PASSWORD = "correct horse";
export const RUNS = Number(Deno.env.get("KEYGATE_FUZZ_RUNS") ?? "1");
export const SEED = Deno.env.get("KEYGATE_FUZZ_SEED");
export const settings = (numRuns: number) => ({
  numRuns: Math.max(1, Math.round(numRuns * RUNS)),
  ...(SEED === undefined ? {} : { seed: Number(SEED) }),
});
/** Throttling out of the way, so that well-formed guesses reach the password check. */
export const LENIENT: ThrottleRules = {
  account: { threshold: 1e9, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
  client: { threshold: 1e9, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
};

/** Fragments that tend to break parsers. */
export const HOSTILE = [
  "<",
  ">",
  "&",
  "&amp;",
  "&lt;",
  "&#0;",
  "&#x110000;",
  "&#65;",
  "&unknown;",
  "<!DOCTYPE x>",
  '<!ENTITY e "e">',
  "<![CDATA[",
  "]]>",
  "<!--",
  "-->",
  "<?xml version='1.0'?>",
  "<?pi x?>",
  "</auth_request>",
  "<auth_request>",
  "<user>",
  "</user>",
  "<email>",
  "<password>",
  "<api_key>",
  ' a="b"',
  "<a:b xmlns:a='x'/>",
  '"',
  "'",
  "\\",
  "\\u0000",
  "\\ud800",
  "\u0000",
  "\ud800",
  "\ufeff",
  "{",
  "}",
  "[",
  "]",
  ":",
  ",",
  "null",
  "true",
  "1e999",
  "-0",
  '"__proto__":',
  '"constructor":',
  '"auth_request":',
  '"email":',
  '"password":',
  '"api_key":',
  "//",
  "/*",
  "*/",
  "\r\n",
  "\t",
  "a".repeat(300),
  EMAIL,
  PASSWORD,
];

export type Mutation =
  | { op: "insert"; at: number; text: string }
  | { op: "delete"; at: number; length: number }
  | { op: "duplicate"; at: number; length: number }
  | { op: "replace"; at: number; length: number; text: string };

export const text = fc.oneof(
  fc.constantFrom(...HOSTILE),
  fc.string({ maxLength: 8 }),
  fc.string({ unit: "binary", maxLength: 8 }),
);
export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant("insert" as const), at: fc.nat(), text }),
  fc.record({
    op: fc.constant("delete" as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 40 }),
  }),
  fc.record({
    op: fc.constant("duplicate" as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 60 }),
  }),
  fc.record({
    op: fc.constant("replace" as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 10 }),
    text,
  }),
);

export function mutate(seed: string, mutations: Mutation[]): string {
  let body = seed;
  for (const m of mutations) {
    const at = m.at % (body.length + 1);
    if (m.op === "insert") body = body.slice(0, at) + m.text + body.slice(at);
    else if (m.op === "delete") body = body.slice(0, at) + body.slice(at + m.length);
    else if (m.op === "duplicate") {
      body = body.slice(0, at) + body.slice(at, at + m.length) + body.slice(at);
    } else body = body.slice(0, at) + m.text + body.slice(at + m.length);
  }
  return body;
}

export const contentType = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.constantFrom(
      "application/json",
      "application/xml",
      "text/xml",
      "application/json; charset=utf-8",
      undefined,
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "text/plain",
      "application/x-www-form-urlencoded",
      "application/xml; charset=latin1",
      "application/json, application/xml",
      "",
    ),
  },
);
export const accept = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(undefined, "application/json", "text/xml", "*/*") },
  { weight: 1, arbitrary: fc.constantFrom("image/png", "application/json;q=0, */*;q=0") },
);

/** Whether `body` means exactly alice's right credentials (the only ones that may get a token). */
export function isRightCredentials(
  body: string,
  format: Format,
  apiKey: string,
  query?: string,
): boolean {
  try {
    const request = parseAuthRequest(body, format);
    const key = (request.apiKey ?? query ?? "").trim().toLowerCase();
    return request.email.toLowerCase() === EMAIL && request.password === PASSWORD &&
      key === apiKey;
  } catch {
    return false;
  }
}

export async function setup() {
  const app = await createTestApp({ throttleRules: LENIENT });
  const userId = await app.addUser(EMAIL, PASSWORD);
  const apiKey = await app.createKey(userId);
  return { app, apiKey };
}

/** How often each status was answered, in the current test. */
export const statuses = new Map<number, number>();

/** Sends one fuzzed request; asserts no 5xx and no token for wrong credentials. */
export async function check(
  app: TestApp,
  apiKey: string,
  body: string | Uint8Array<ArrayBuffer>,
  type: string | undefined,
  accept?: string,
) {
  const headers: Record<string, string> = {};
  if (type !== undefined) headers["content-type"] = type;
  if (accept !== undefined) headers.accept = accept;
  const tokensBefore = await app.store.countRows("tokens");
  const response = await app.handler(
    new Request(`${BASE}/api/userservice/tokens`, { method: "POST", body, headers }),
  );
  const text = await response.text();
  statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
  assert.ok(response.status < 500, `${response.status}: ${text}`);
  if (response.status === 200) {
    // The oracle reads the bytes the server read: a lone surrogate in a generated string went
    // over the wire as U+FFFD (a valid XML name character), so it must not judge the JS string.
    const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
    const bodyText = new TextDecoder().decode(bytes);
    const format: Format = type?.includes("json") || (!type && bodyText.trimStart()[0] === "{")
      ? "json"
      : "xml";
    assert.ok(
      isRightCredentials(bodyText.replace(/^\ufeff/, ""), format, apiKey),
      `a token for: ${JSON.stringify(bodyText)}`,
    );
    assert.equal(await app.store.countRows("tokens"), tokensBefore + 1);
  } else {
    assert.equal(await app.store.countRows("tokens"), tokensBefore, "a token was stored");
  }
}

export async function assertStillAnswers(app: TestApp, apiKey: string) {
  const health = await app.handler(new Request(`${BASE}/healthz`));
  assert.equal(health.status, 200);
  await health.body?.cancel();
  // A fresh token (earlier ones may have been revoked by the cap of 100) still works.
  const token = await issueToken(app.handler, EMAIL, PASSWORD, apiKey);
  const valid = await secureGet(
    app.handler,
    "/api/secure/userservice/tokens/current",
    apiKey,
    token,
  );
  assert.equal(valid.status, 200);
  await valid.body?.cancel();
}

/** Escapes text for an XML element's content. */
export function escapeXml(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
