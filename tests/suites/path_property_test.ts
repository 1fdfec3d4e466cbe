/**
 * The invariant behind docs/security.md ("Canonical paths"), checked with
 * generated spellings (fast-check): whatever keygate lets through without an
 * access token, a backend that decodes (even twice), splits on `/` and `\`,
 * strips path parameters and case-folds Unicode-aware would not route under
 * a `secure` segment. Checked against keygate's own router, `--upstream` (a
 * recording backend) and forward-auth, with requests written byte for byte.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { createTestApp } from "../_helpers/test_app.ts";
import { startRawServer, startRecordingBackend } from "../_helpers/raw_http.ts";

const RUNS = 120;

/**
 * A segment's name as a Unicode-aware, case-insensitive backend reads it:
 * written here independently of src/http/paths.ts, so the oracle is not the code under test.
 */
function toBackendName(segment: string): string {
  const folded = segment.normalize("NFKC").replace(/\p{Default_Ignorable_Code_Point}/gu, "")
    .toUpperCase().toLowerCase();
  // Java's trim() and Spring's trimTokens trim both ends; form decoders read "+" as a space.
  return folded.split(/[.:]/, 1)[0].replace(/\+/g, " ").replace(/^\s+|[\s.]+$/gu, "");
}

/** How a lenient backend reads a path: is any segment `secure`? */
function isSecureToBackend(path: string): boolean {
  let decoded = path.split(/[?#]/, 1)[0];
  for (let i = 0; i < 2; i++) {
    try {
      decoded = decodeURIComponent(decoded);
    } catch {
      decoded = decoded.replace(
        /%([0-9A-Fa-f]{2})/g,
        (_, hex) => String.fromCharCode(parseInt(hex, 16)),
      );
    }
  }
  return decoded.split(/[/\\]/).some((segment) =>
    toBackendName(segment.split(";", 1)[0]) === "secure"
  );
}

/** Spellings an attacker would try, as they go on the wire. */
const SEGMENT = fc.oneof(
  fc.constantFrom(
    "secure",
    "SeCuRe",
    "%73ecure",
    "%2573ecure",
    "sec%75re",
    "%C5%BFecure",
    "\u017fecure",
    "%EF%BC%B3%EF%BC%A5%EF%BC%A3%EF%BC%B5%EF%BC%B2%EF%BC%A5",
    "\uff53\uff45\uff43\uff55\uff52\uff45",
    "secure;jsessionid=1",
    "secure%3Bx",
    "secure.json",
    "secure.",
    "secure::$DATA",
    "Secure:x",
    "secure%20",
    "%20secure",
    "secure+",
    "+SECURE",
    "secure%E2%80%8B",
    "se%C2%ADcure",
    "a%2Fsecure",
    "a%5Csecure",
    "a\\secure",
    "public;x=1",
    "..;",
    "../..",
    "..",
    "%2e%2e",
    "%2E",
    "",
    "api",
    "public",
    "Items",
  ),
  fc.string({
    unit: fc.constantFrom(..."secuRE;%.\\/~-_!$&'()*+,=:@2F5C3B7eK\u017f"),
    maxLength: 10,
  }),
);
const PATH = fc.array(SEGMENT, { minLength: 1, maxLength: 5 }).map((segments) =>
  "/" + segments.join("/")
);

async function setup(withBackend: boolean) {
  const backend = withBackend ? startRecordingBackend() : undefined;
  const app = await createTestApp(backend && { upstream: { url: backend.url, timeoutMs: 5000 } });
  const apiKey = await app.createKey(await app.addUser("alice@example.org", "pw"));
  const server = await startRawServer(app.handler, false);
  return {
    app,
    apiKey,
    backend,
    server,
    async close() {
      await server.close();
      await backend?.close();
      app.close();
    },
  };
}

Deno.test("[property] keygate's router asks for a token on every path a backend reads as secure", async () => {
  const { apiKey, server, close } = await setup(false);
  try {
    await fc.assert(
      fc.asyncProperty(PATH, async (path) => {
        const response = await server.send(
          `GET ${path}?api_key=${apiKey} HTTP/1.1\r\nHost: localhost`,
        );
        // Without --upstream, anything not secure to keygate answers 404 to a valid key.
        const letThrough = response.status !== 400 && response.status !== 401;
        if (letThrough) assert.ok(!isSecureToBackend(path), `${path} → ${response.status}`);
      }),
      { numRuns: RUNS },
    );
  } finally {
    await close();
  }
});

Deno.test("[property] --upstream never forwards a path a backend reads as secure without a token", async () => {
  const { apiKey, server, backend, close } = await setup(true);
  try {
    await fc.assert(
      fc.asyncProperty(
        PATH,
        fc.constantFrom("X_Keygate_User", "x-keygate_user", "X-KEYGATE-USER", "X-Forwarded-Host"),
        async (path, header) => {
          const before = backend!.seen.length;
          const response = await server.send(
            `GET ${path}?api_key=${apiKey} HTTP/1.1\r\nHost: localhost\r\n${header}: forged`,
          );
          await Promise.resolve(response.body);
          const seen = backend!.seen.slice(before);
          for (const { path: received, headers } of seen) {
            assert.ok(!isSecureToBackend(path), `sent ${path}`);
            assert.ok(!isSecureToBackend(received), `received ${received}`);
            for (const [name, value] of headers) {
              assert.ok(value !== "forged", `${name} from the client reached the backend`);
            }
          }
        },
      ),
      { numRuns: RUNS },
    );
    assert.ok(backend!.seen.length > 0, "some requests reached the backend");
  } finally {
    await close();
  }
});

Deno.test("[property] forward-auth answers 200 to a key alone only for paths no backend reads as secure", async () => {
  const { apiKey, server, close } = await setup(false);
  let allowed = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        PATH,
        fc.constantFrom("X-Original-URI", "x-forwarded-uri", "X-FORWARDED-URI"),
        async (path, header) => {
          const response = await server.send(
            `GET /api/userservice/verify HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: ${apiKey}\r\n` +
              `${header}: ${path}`,
          );
          if (response.status === 200) {
            allowed++;
            assert.ok(!isSecureToBackend(path), `${path} allowed`);
          } else {
            assert.ok([400, 401, 403].includes(response.status), `${path} → ${response.status}`);
          }
        },
      ),
      { numRuns: RUNS },
    );
    assert.ok(allowed > 0, "some public paths were allowed");
  } finally {
    await close();
  }
});

Deno.test("isSecureToBackend() reads the spellings a lenient backend routes as secure", () => {
  for (
    const path of [
      "/api/secure/x",
      "/api/%C5%BFecure",
      "/a/secure;x=1/b",
      "/a\\secure",
      "/%2573ecure",
    ]
  ) {
    assert.ok(isSecureToBackend(path), path);
  }
  for (const path of ["/api/public", "/api/insecure", "/securely"]) {
    assert.ok(!isSecureToBackend(path), path);
  }
});
