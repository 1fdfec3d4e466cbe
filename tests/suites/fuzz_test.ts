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
import { jsonAuthRequest, xmlAuthRequest } from "../_helpers/requests.ts";
import {
  accept,
  assertStillAnswers,
  check,
  contentType,
  EMAIL,
  escapeXml,
  mutate,
  mutation,
  PASSWORD,
  settings,
  setup,
  statuses,
} from "../_helpers/fuzz_requests.ts";

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
