/**
 * The portal's route table says who may call each route, and the dispatcher enforces it
 * before the handler: every row whose caller is `session` or `session+csrf` is enumerated from
 * the table and refused without a session (and, for a change, without the CSRF token or from
 * another Origin), with nothing stored.
 */
import assert from "node:assert/strict";
import { createPortalThrottle } from "../../src/auth/portal/portal_throttle.ts";
import { createPortalRoutes, type PortalDeps } from "../../src/http/portal/portal_app.ts";
import { PORTAL_API, type PortalRoute } from "../../src/http/portal/portal_request.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { activeUser, ORIGIN, type PortalRig, startPortalRig, TEST_CODE_KEY } from "./_portal.ts";
import { assertError as assertRefused } from "./_portal_answers.ts";

/** The table's rows, built as the handler builds them (over the rig's store and clock). */
function readRoutes(rig: PortalRig): PortalRoute[] {
  const deps: PortalDeps = {
    store: rig.app.store,
    clock: rig.app.clock,
    hasher: createPasswordHasher(),
    throttle: createPortalThrottle({
      store: rig.app.store,
      clock: rig.app.clock,
      key: TEST_CODE_KEY,
    }),
    mode: "open",
    codeKey: TEST_CODE_KEY,
    origin: ORIGIN,
  };
  return createPortalRoutes(deps);
}

/** A request path for a row (`:id` → 1) relative to the API, and a body a change may carry. */
function toRequest(route: PortalRoute): { path: string; body?: unknown } {
  const path = route.path.slice(PORTAL_API.length).replaceAll(/:[a-z]+/g, "1");
  return { path, body: route.method === "GET" ? undefined : {} };
}

/** What the store holds that any of these routes could change. */
async function readStoredState(rig: PortalRig) {
  const store = rig.app.store;
  return {
    keys: await store.listApiKeys(),
    users: await store.listUsers(),
    tokens: await store.countRows("tokens"),
    audit: await store.countRows("audit_log"),
  };
}

Deno.test("[e2e] portal: the table's callers: every API row but sign-up's needs a session", async () => {
  await using rig = await startPortalRig();
  const routes = readRoutes(rig);
  const anyone = routes.filter((r) => r.caller === "anyone").map((r) => `${r.method} ${r.path}`);
  // The pages (the page checks the session through the API) and the ways to a session.
  assert.deepEqual(anyone.filter((row) => row.includes(PORTAL_API)).sort(), [
    `POST ${PORTAL_API}/forgot`,
    `POST ${PORTAL_API}/reset`,
    `POST ${PORTAL_API}/signin`,
    `POST ${PORTAL_API}/signup`,
    `POST ${PORTAL_API}/verify`,
  ]);
  for (const route of routes) {
    assert.ok(
      ["anyone", "session", "session+csrf"].includes(route.caller),
      `${route.path}: ${route.caller}`,
    );
    // A change (anything but GET) by a signed-in user needs the CSRF check.
    if (route.caller !== "anyone") {
      assert.equal(route.caller === "session+csrf", route.method !== "GET", route.path);
    }
  }
  assert.equal(routes.filter((r) => r.caller !== "anyone").length, 13);
});

Deno.test("[e2e] portal: every session route is refused without a live session, nothing stored", async () => {
  await using rig = await startPortalRig();
  const routes = readRoutes(rig).filter((route) => route.caller !== "anyone");
  const before = await readStoredState(rig);
  for (const route of routes) {
    const { path, body } = toRequest(route);
    const what = `${route.method} ${route.path}`;
    await assertRefused(await rig.api(route.method, path, body), 401, "not_signed_in", what);
    const forged = { cookie: "__Host-keygate_portal=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" };
    await assertRefused(
      await rig.api(route.method, path, body, { ...forged, "x-csrf-token": "x" }),
      401,
      "not_signed_in",
      `${what} (an unknown session)`,
    );
  }
  assert.deepEqual(await readStoredState(rig), before);
});

Deno.test("[e2e] portal: every session+csrf route is refused without the CSRF token or from another Origin", async () => {
  await using rig = await startPortalRig();
  const email = "callers@example.org";
  const browser = await activeUser(rig, email);
  const cookie = browser.cookie!;
  const before = await readStoredState(rig);
  const routes = readRoutes(rig);
  for (const route of routes.filter((r) => r.caller === "session+csrf")) {
    const { path, body } = toRequest(route);
    const what = `${route.method} ${route.path}`;
    await assertRefused(
      await rig.api(route.method, path, body, { cookie }),
      403,
      "csrf_failed",
      what,
    );
    await assertRefused(
      await rig.api(route.method, path, body, { cookie, "x-csrf-token": `${browser.csrf}x` }),
      403,
      "csrf_failed",
      `${what} (a wrong token)`,
    );
    await assertRefused(
      await rig.api(route.method, path, body, {
        cookie,
        "x-csrf-token": browser.csrf!,
        origin: "https://evil.example",
      }),
      403,
      "forbidden",
      `${what} (another Origin)`,
    );
  }
  assert.deepEqual(await readStoredState(rig), before);
  // The same session passes the check: the reads answer, the user the handler got is this one.
  for (const route of routes.filter((r) => r.caller === "session")) {
    const response = await browser.call(route.method, toRequest(route).path);
    assert.equal(response.status, 200, `${route.method} ${route.path}`);
    await response.body?.cancel();
  }
  const session = await (await browser.call("GET", "/session")).json();
  assert.equal(session.email, email);
  assert.equal(session.csrf_token, browser.csrf);
});
