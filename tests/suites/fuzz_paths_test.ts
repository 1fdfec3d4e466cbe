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
import type { Format } from "../../src/formats/format.ts";
import { BASE } from "../_helpers/requests.ts";
import { settings, setup, statuses } from "../_helpers/fuzz_requests.ts";

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
