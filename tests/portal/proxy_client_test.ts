/**
 * The portal behind a proxy (issue 25's review): its throttles count per client address, so a
 * request whose proxy named no client (no `X-Forwarded-For`, or one naming only trusted
 * proxies) is refused with 403 `forwarded_for_required` instead of being counted on the
 * proxy's own address, which every such request would share; the operator is warned once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createPortalThrottle } from "../../src/auth/portal/portal_throttle.ts";
import { createTestApp } from "../_helpers/test_app.ts";
import { openTestStore } from "../_helpers/store.ts";
import { BASE } from "../_helpers/requests.ts";

const PROXY = { trustedProxies: ["127.0.0.1/32", "10.1.0.0/16"] };
const KEY = new Uint8Array(32).fill(7);

async function startProxiedPortal() {
  const opened = await openTestStore();
  const app = await createTestApp({
    openStore: () => Promise.resolve(opened),
    proxy: PROXY,
    scheme: "http",
    portal: {
      throttle: createPortalThrottle({
        store: opened.store,
        clock: { now: () => Date.now() },
        key: KEY,
      }),
      mode: "open",
      codeKey: KEY,
      origin: BASE,
    },
  });
  /** A sign-in through the proxy at 127.0.0.1, with `forwardedFor` as the header (if any). */
  async function signIn(forwardedFor?: string) {
    const response = await app.handler(
      new Request(`${BASE}/api/portal/v1/signin`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-forwarded-proto": "https",
          ...(forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor }),
        },
        body: JSON.stringify({ email: "dev@example.org", password: "not the password" }),
      }),
      { remoteAddr: { hostname: "127.0.0.1" } },
    );
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    return { status: response.status, body: await response.json() };
  }
  return { app, signIn };
}

const REFUSED = {
  error: {
    code: "forwarded_for_required",
    message: "The proxy sent no client address: the portal needs X-Forwarded-For",
  },
};

Deno.test("[e2e] portal behind a proxy: a request whose proxy named no client is refused with 403, nothing counted, warned once", async () => {
  const { app, signIn } = await startProxiedPortal();
  await using _app = app;
  for (const forwardedFor of [undefined, "", "junk", "10.1.0.5", "203.0.113.9, 10.1.0.5 , x"]) {
    assert.deepEqual(await signIn(forwardedFor), { status: 403, body: REFUSED }, forwardedFor);
  }
  assert.deepEqual(await app.store.listLoginFailures(Date.now()), [], "no counter moved");
  const warnings = app.logLines.filter((line) => line.includes("without X-Forwarded-For"));
  assert.equal(warnings.length, 1, "one warning, not one a request");
  assert.match(warnings[0], /"peer":"127\.0\.0\.1"/);
});

Deno.test("[e2e] portal behind a proxy: a named client is answered and counted on its own address", async () => {
  const { app, signIn } = await startProxiedPortal();
  await using _app = app;
  // The client's own header is ignored past the proxy's entry, as everywhere in proxy mode.
  const answer = await signIn("198.51.100.1, 203.0.113.9, 10.1.0.5");
  assert.equal(answer.status, 401);
  assert.equal(answer.body.error.code, "invalid_credentials");
  const subjects = (await app.store.listLoginFailures(Date.now())).map((row) => row.subject);
  assert.ok(subjects.includes("portal-client:203.0.113.9"), subjects.join(" "));
  assert.ok(!subjects.some((subject) => subject.includes("127.0.0.1")), subjects.join(" "));
  assert.equal(app.logLines.filter((line) => line.includes("X-Forwarded-For")).length, 0);
});
