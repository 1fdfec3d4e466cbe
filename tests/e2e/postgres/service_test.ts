/**
 * Two keygate handlers (two instances) on one PostgreSQL database behave as
 * one service: tokens cross, revocations cross within their bounds, failed
 * logins count once, and an outage fails closed and recovers (server processes and the admin
 * CLI on one database: service_processes_test.ts).
 */
import assert from "node:assert/strict";
import type { Handler } from "../../../src/http/app.ts";
import { ACCOUNT_THROTTLE } from "../../../src/auth/throttle.ts";
import {
  openPostgresStore,
  type PostgresStore,
  type PostgresStoreOptions,
} from "../../../src/store/postgres/open_postgres_store.ts";
import {
  assertError,
  BASE,
  issueToken,
  jsonAuthRequest,
  secureGet,
} from "../../_helpers/requests.ts";
import { createTestApp, type TestApp } from "../../_helpers/test_app.ts";
import { startTestCluster } from "../../_helpers/postgres_cluster.ts";
import { waitForStatus } from "../../_helpers/wait_for_status.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;
const PASSWORD = "correct horse";
const CURRENT = "/api/secure/userservice/tokens/current";

/** Instances A and B: one handler each, each on its own store, both on one new database. */
async function twoInstances(options: PostgresStoreOptions = {}) {
  const url = await cluster!.createDatabase("e2e2");
  const stores: PostgresStore[] = [];
  const open = async (name: string) => {
    const store = await openPostgresStore(url, { ...options, applicationName: name });
    stores.push(store);
    const close = () => store.closeStore();
    return {
      store,
      path: url,
      dir: "",
      close,
      [Symbol.dispose]: () => void close(),
      [Symbol.asyncDispose]: close,
    };
  };
  const a = await createTestApp({ openStore: () => open("keygate-a") });
  const b = await createTestApp({ openStore: () => open("keygate-b") });
  const userId = await a.addUser("alice@example.org", PASSWORD);
  const apiKey = await a.createKey(userId);
  return {
    a,
    b,
    storeA: stores[0],
    storeB: stores[1],
    userId,
    apiKey,
    url,
    async [Symbol.asyncDispose]() {
      await a[Symbol.asyncDispose]();
      await b[Symbol.asyncDispose]();
    },
  };
}

async function waitForListeners(...stores: PostgresStore[]): Promise<void> {
  const start = performance.now();
  while (!stores.every((store) => store.readGrantEpochStats().listening)) {
    if (performance.now() - start > 5000) throw new Error("Listeners not up within 5 s");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function deleteCurrent(handler: Handler, apiKey: string, token: string): Promise<Response> {
  const url = new URL(BASE + CURRENT);
  url.searchParams.set("api_key", apiKey);
  url.searchParams.set("api_token", token);
  return handler(new Request(url, { method: "DELETE" }));
}

Deno.test({
  name: "[pg e2e] a token issued by instance A works on B; revoked through A, B refuses it",
  ignore,
  async fn() {
    await using db = await twoInstances();
    await waitForListeners(db.storeA, db.storeB);
    const token = await issueToken(db.a.handler, "alice@example.org", PASSWORD, db.apiKey);
    const onB = await secureGet(db.b.handler, CURRENT, db.apiKey, token, {
      accept: "application/json",
    });
    assert.equal(onB.status, 200);
    assert.equal(onB.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal((await onB.json()).token_info.email, "alice@example.org");
    // B now holds the grant in its cache.
    assert.equal((await secureGet(db.b.handler, CURRENT, db.apiKey, token)).status, 200);

    const revoked = await deleteCurrent(db.a.handler, db.apiKey, token);
    assert.equal(revoked.status, 204);
    // A refuses it on its very next request.
    await assertError(
      await secureGet(db.a.handler, CURRENT, db.apiKey, token, { accept: "application/json" }),
      401,
      "invalid_token",
      "json",
    );
    // B refuses it as soon as the notification arrives (milliseconds; the bound is 1 s).
    const tookMs = await waitForStatus(
      "refused by B",
      () => secureGet(db.b.handler, CURRENT, db.apiKey, token),
      401,
      1000,
    );
    assert.ok(tookMs < 1000, `took ${tookMs} ms`);
    await assertError(
      await secureGet(db.b.handler, CURRENT, db.apiKey, token, { accept: "application/json" }),
      401,
      "invalid_token",
      "json",
    );
    // One shared audit log: B reads the issue and the revocation A wrote.
    assert.deepEqual((await db.storeB.listAudit()).map((row) => row.action), [
      "token.issued",
      "token.revoked",
    ]);
    assert.ok(db.storeB.readGrantEpochStats().notifications >= 1);
  },
});

Deno.test({
  name:
    "[pg e2e] with B's listener killed by pg_terminate_backend, B still refuses a revoked token within the poll interval",
  ignore,
  async fn() {
    await using db = await twoInstances({ pollMs: 200 });
    await waitForListeners(db.storeA, db.storeB);
    const token = await issueToken(db.a.handler, "alice@example.org", PASSWORD, db.apiKey);
    assert.equal((await secureGet(db.b.handler, CURRENT, db.apiKey, token)).status, 200);
    const { default: postgres } = await import("postgres");
    const admin = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      const killed = await admin`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE application_name = 'keygate-b-listener'`;
      assert.deepEqual(killed.map((row) => row.ok), [true]);
    } finally {
      await admin.end();
    }
    while (db.storeB.readGrantEpochStats().listening) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal((await deleteCurrent(db.a.handler, db.apiKey, token)).status, 204);
    const tookMs = await waitForStatus(
      "refused by B",
      () => secureGet(db.b.handler, CURRENT, db.apiKey, token),
      401,
      1000,
    );
    // Whether B's next poll saw it, or the listener it re-established on that poll (which drops
    // the cache and re-reads the epoch), the bound is the poll interval plus a round trip.
    assert.ok(tookMs <= 1000, `took ${tookMs} ms`);
    assert.ok(db.storeB.readGrantEpochStats().listens >= 1);
  },
});

Deno.test({
  name:
    "[pg e2e] failed logins alternating between A and B are throttled at the one-instance threshold",
  ignore,
  async fn() {
    await using db = await twoInstances();
    const login = (app: TestApp, password: string, client: string) =>
      app.handler(
        new Request(`${BASE}/api/userservice/tokens`, {
          method: "POST",
          body: jsonAuthRequest("alice@example.org", password, db.apiKey),
          headers: { "content-type": "application/json", accept: "application/json" },
        }),
        { remoteAddr: { hostname: client } },
      );
    for (let i = 0; i < ACCOUNT_THROTTLE.threshold; i++) {
      const response = await login(i % 2 === 0 ? db.a : db.b, "wrong", `198.51.100.${i}`);
      await assertError(response, 401, "invalid_credentials", "json");
    }
    // The sixth attempt, on either instance, even with the right password: 429.
    for (const app of [db.a, db.b]) {
      const response = await login(app, PASSWORD, "198.51.100.99");
      assert.equal(response.status, 429);
      assert.equal(response.headers.get("retry-after"), "1");
      assert.equal(
        JSON.parse(await response.text()).error_response.errors.error[0].error_code,
        "too_many_attempts",
      );
    }
    assert.equal(await db.storeA.countRows("tokens"), 0);
  },
});

// Last: stops the server for a while.
Deno.test({
  name:
    "[pg e2e] database stopped: B answers 503 after the staleness bound, /readyz 503; both recover after restart",
  ignore,
  async fn() {
    await using db = await twoInstances({ pollMs: 100, stalenessMs: 1000 });
    await waitForListeners(db.storeA, db.storeB);
    const token = await issueToken(db.a.handler, "alice@example.org", PASSWORD, db.apiKey);
    assert.equal((await secureGet(db.b.handler, CURRENT, db.apiKey, token)).status, 200);
    await cluster!.pause();
    try {
      const tookMs = await waitForStatus(
        "503 from B",
        () => secureGet(db.b.handler, CURRENT, db.apiKey, token),
        503,
        5000,
      );
      assert.ok(tookMs < 5000);
      const response = await secureGet(db.b.handler, CURRENT, db.apiKey, token, {
        accept: "application/json",
      });
      assert.equal(response.headers.get("retry-after"), "1");
      await assertError(response, 503, "service_unavailable", "json");
      const ready = await db.b.handler(new Request(`${BASE}/readyz`));
      assert.equal(ready.status, 503);
      assert.deepEqual(await ready.json(), { status: "unavailable" });
    } finally {
      await cluster!.resume();
    }
    await waitForStatus(
      "200 from B",
      () => secureGet(db.b.handler, CURRENT, db.apiKey, token),
      200,
      10_000,
    );
    await waitForStatus("ready", () => db.a.handler(new Request(`${BASE}/readyz`)), 200, 10_000);
    assert.equal((await secureGet(db.a.handler, CURRENT, db.apiKey, token)).status, 200);
  },
});

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
