/**
 * Property-based fuzzing of the token endpoint with fast-check: thousands of
 * mutated XML and JSON token requests through the real handler. Whatever
 * arrives, the answer is never a 5xx, never a token for wrong credentials,
 * and the handler keeps answering.
 *
 * On failure fast-check prints the seed and the shrunk input; rerun one with
 * `KEYGATE_FUZZ_SEED=<seed>`. `KEYGATE_FUZZ_RUNS` scales the run counts.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { parseAuthRequest } from "../../src/formats/auth_request.ts";
import type { Format } from "../../src/formats/format.ts";
import type { ThrottleRules } from "../../src/auth/throttle.ts";
import {
  BASE,
  issueToken,
  jsonAuthRequest,
  secureGet,
  xmlAuthRequest,
} from "../_helpers/requests.ts";
import { createTestApp, type TestApp } from "../_helpers/test_app.ts";

const EMAIL = "alice@example.org";
const PASSWORD = "correct horse";
const RUNS = Number(Deno.env.get("KEYGATE_FUZZ_RUNS") ?? "1");
const SEED = Deno.env.get("KEYGATE_FUZZ_SEED");
const settings = (numRuns: number) => ({
  numRuns: Math.max(1, Math.round(numRuns * RUNS)),
  ...(SEED === undefined ? {} : { seed: Number(SEED) }),
});
/** Throttling out of the way, so that well-formed guesses reach the password check. */
const LENIENT: ThrottleRules = {
  account: { threshold: 1e9, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
  client: { threshold: 1e9, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 2000 },
};

/** Fragments that tend to break parsers. */
const HOSTILE = [
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

type Mutation =
  | { op: "insert"; at: number; text: string }
  | { op: "delete"; at: number; length: number }
  | { op: "duplicate"; at: number; length: number }
  | { op: "replace"; at: number; length: number; text: string };

const text = fc.oneof(
  fc.constantFrom(...HOSTILE),
  fc.string({ maxLength: 8 }),
  fc.string({ unit: "binary", maxLength: 8 }),
);
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
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

function mutate(seed: string, mutations: Mutation[]): string {
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

const contentType = fc.oneof(
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
const accept = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(undefined, "application/json", "text/xml", "*/*") },
  { weight: 1, arbitrary: fc.constantFrom("image/png", "application/json;q=0, */*;q=0") },
);

/** Whether `body` means exactly alice's right credentials (the only ones that may get a token). */
function isRightCredentials(body: string, format: Format, apiKey: string, query?: string): boolean {
  try {
    const request = parseAuthRequest(body, format);
    const key = (request.apiKey ?? query ?? "").trim().toLowerCase();
    return request.email.toLowerCase() === EMAIL && request.password === PASSWORD &&
      key === apiKey;
  } catch {
    return false;
  }
}

async function setup() {
  const app = await createTestApp({ throttleRules: LENIENT });
  const userId = await app.addUser(EMAIL, PASSWORD);
  const apiKey = await app.createKey(userId);
  return { app, apiKey };
}

/** How often each status was answered, in the current test. */
const statuses = new Map<number, number>();

/** Sends one fuzzed request; asserts no 5xx and no token for wrong credentials. */
async function check(
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

async function assertStillAnswers(app: TestApp, apiKey: string) {
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

Deno.test("[fuzz] POST /api/userservice/tokens: mutated XML and JSON never get a 5xx or a wrong token", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  statuses.clear();
  const seeds = [
    xmlAuthRequest(EMAIL, PASSWORD, apiKey),
    `<auth_request><user><email>${EMAIL}</email><password><![CDATA[${PASSWORD}]]></password>` +
    `</user><api_key>${apiKey}</api_key></auth_request>`,
    jsonAuthRequest(EMAIL, PASSWORD, apiKey),
    `{'auth_request':{'user':{'email':'${EMAIL}','password':'${PASSWORD}'},'api_key':'${apiKey}'}}`,
    xmlAuthRequest(EMAIL, "wrong password", apiKey),
    jsonAuthRequest("nobody@example.org", PASSWORD, apiKey),
  ];
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...seeds),
      fc.array(mutation, { minLength: 1, maxLength: 4 }),
      contentType,
      accept,
      async (seed, mutations, type, accept) => {
        await check(app, apiKey, mutate(seed, mutations), type, accept);
      },
    ),
    settings(2000),
  );
  // The mutations reached the parsers' error paths and the password check.
  assert.ok((statuses.get(400) ?? 0) > 0 && (statuses.get(401) ?? 0) > 0, "no coverage");
  await assertStillAnswers(app, apiKey);
});

Deno.test("[fuzz] POST /api/userservice/tokens: well-formed requests with wrong values never get a token", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  statuses.clear();
  const value = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom(EMAIL, EMAIL.toUpperCase(), ` ${EMAIL}`, PASSWORD, ` ${PASSWORD}`, apiKey),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const often = <T>(likely: T) =>
    fc.oneof({ weight: 4, arbitrary: fc.constant(likely) }, { weight: 1, arbitrary: value });
  const password = fc.oneof(
    fc.string({ minLength: 1, maxLength: 40 }),
    fc.constantFrom(
      PASSWORD,
      PASSWORD.toUpperCase(),
      `${PASSWORD} `,
      ` ${PASSWORD}`,
      PASSWORD.slice(1),
      `${PASSWORD}\u0000`,
      PASSWORD.normalize("NFD"),
      "correct  horse",
      "correct\thorse",
    ),
    value,
  );
  await fc.assert(
    fc.asyncProperty(
      fc.record({ email: often(EMAIL), password, api_key: often(apiKey) }, {
        requiredKeys: [],
      }),
      fc.dictionary(fc.string({ maxLength: 12 }), value, { maxKeys: 2 }),
      fc.boolean(),
      async (fields, extra, asXml) => {
        const user: Record<string, unknown> = { ...extra };
        if ("email" in fields) user.email = fields.email;
        if ("password" in fields) user.password = fields.password;
        let body: string;
        if (asXml) {
          const element = (name: string, v: unknown) =>
            v === undefined
              ? ""
              : `<${name}>${escapeXml(typeof v === "string" ? v : JSON.stringify(v))}</${name}>`;
          body = `<auth_request><user>${element("email", user.email)}${
            element("password", user.password)
          }</user>${element("api_key", fields.api_key)}</auth_request>`;
        } else {
          body = JSON.stringify({ auth_request: { user, api_key: fields.api_key } });
        }
        await check(app, apiKey, body, asXml ? "application/xml" : "application/json");
      },
    ),
    settings(300),
  );
  assert.ok((statuses.get(401) ?? 0) > 0, "no request reached the password check");
  await assertStillAnswers(app, apiKey);
});

Deno.test("[fuzz] POST /api/userservice/tokens: random bytes never get a 5xx", async () => {
  const { app, apiKey } = await setup();
  using _ = app;
  statuses.clear();
  await fc.assert(
    fc.asyncProperty(fc.uint8Array({ maxLength: 600 }), contentType, async (bytes, type) => {
      await check(app, apiKey, bytes, type);
    }),
    settings(500),
  );
  await assertStillAnswers(app, apiKey);
});

function escapeXml(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Pieces of request paths: separators, dots, suffixes, escapes, secure spellings, non-ASCII. */
const PATH_PIECES = [
  "/",
  "/",
  "api",
  "secure",
  "SECURE",
  "userservice",
  "tokens",
  "x",
  "..",
  "../..",
  ".json",
  ".xml",
  "json",
  "%2E",
  "%2F",
  "%",
  "%zz",
  ";",
  "é",
  " ",
  "%e9",
  "%C3%A9",
  "ſecure",
  "+",
];

/**
 * The format an answer must have: a `.json`/`.xml` suffix of the last segment (decoded when it
 * can be) decides, whatever else is wrong with the request; else `Accept` (XML by default).
 */
function expectedFormat(pathname: string, accept: string | undefined): Format {
  const last = pathname.split("/").filter((segment) => segment !== "").at(-1) ?? "";
  let name = last;
  try {
    name = decodeURIComponent(last);
  } catch {
    // Not decodable: read as sent.
  }
  const suffix = /\.(json|xml)$/.exec(name)?.[1] as Format | undefined;
  return suffix ?? (accept === "application/json" ? "json" : "xml");
}

Deno.test("[fuzz] any path and Host: a .json/.xml suffix decides the format before Accept, 400s too", async () => {
  const { app } = await setup();
  using _ = app;
  statuses.clear();
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.constantFrom(...PATH_PIECES), { maxLength: 8 }),
      fc.constantFrom(undefined, "keygate.test", "keygate.test:8443", "a b", "h:99999", "a@b"),
      fc.constantFrom(undefined, "application/json", "application/xml", "text/xml", "*/*"),
      async (pieces, host, accept) => {
        const url = new URL(`${BASE}/${pieces.join("")}`);
        const headers: Record<string, string> = {};
        if (host !== undefined) headers.host = host;
        if (accept !== undefined) headers.accept = accept;
        const response = await app.handler(new Request(url, { headers }));
        await response.body?.cancel();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        const want = expectedFormat(url.pathname, accept);
        assert.ok(response.status < 500, `${response.status} ${url.pathname}`);
        assert.match(
          response.headers.get("content-type") ?? "",
          want === "json" ? /^application\/json/ : /^application\/xml/,
          `${response.status} ${url.pathname} Host ${host} Accept ${accept}`,
        );
      },
    ),
    settings(3000),
  );
  assert.ok((statuses.get(400) ?? 0) > 0, "no request was refused as malformed");
});
