/**
 * Two keygate handlers (two instances) on one PostgreSQL database behave as
 * one service: tokens cross, revocations cross within their bounds, failed
 * logins count once, and an outage fails closed and recovers.
 */
import assert from "node:assert/strict";
import { GRANT_CHANNEL } from "../../../src/store/postgres/grant_epoch.ts";
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
import {
  POSTGRES_SKIP,
  type PostgresCluster,
  startPostgres,
} from "../../_helpers/postgres_cluster.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";
import { migratePostgres } from "../../../src/store/postgres/migrate.ts";
import { POSTGRES_MIGRATIONS } from "../../../src/store/postgres/schema.ts";
import { runAdmin } from "../../_helpers/admin_cli.ts";

const cluster: PostgresCluster | undefined = POSTGRES_SKIP ? undefined : await startPostgres();
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

/** Sends `request()` until `done(status)`, at most `withinMs`; resolves to the time it took. */
async function waitForStatus(
  what: string,
  request: () => Promise<Response>,
  status: number,
  withinMs: number,
): Promise<number> {
  const start = performance.now();
  for (;;) {
    const response = await request();
    await response.body?.cancel();
    if (response.status === status) return performance.now() - start;
    if (performance.now() - start > withinMs) {
      throw new Error(`Not ${what} (${status}) within ${withinMs} ms: last ${response.status}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function waitForListeners(...stores: PostgresStore[]): Promise<void> {
  const start = performance.now();
  while (!stores.every((store) => store.readGrantEpochStats().listening)) {
    if (performance.now() - start > 5000) throw new Error("Listeners not up within 5 s");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Revokes the token of `current` (a secure path with its credentials) through server `one` and
 * waits until server `two` refuses it, at most `withinMs`.
 */
async function revokeOnOneSeenOnTwo(
  one: string,
  two: string,
  current: string,
  headers: Record<string, string>,
  withinMs: number,
): Promise<void> {
  const revoked = await fetch(`${one}${current}`, { method: "DELETE", headers });
  assert.equal(revoked.status, 204);
  await revoked.body?.cancel();
  const tookMs = await waitForStatus(
    "refused by the other process",
    () => fetch(`${two}${current}`, { headers }),
    401,
    withinMs,
  );
  assert.ok(tookMs <= withinMs, `took ${tookMs} ms`);
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
    "[pg e2e] --store-listen off: no listener, no notification; the other process sees a revocation through the poll",
  ignore,
  sanitizeResources: false, // the servers' pipes close after their exit, at the end of the test
  async fn() {
    const url = await cluster!.createDatabase("nolisten");
    const apiKey = await addUserWithKey(url, "q@example.org", PASSWORD);
    const args = ["--behind-proxy", "on", "--metrics", "on", "--metrics-port", "0"];
    const [one, two] = await Promise.all([
      startServerProcess(url, [...args, "--store-listen", "off"]),
      startServerProcess(url, [...args, "--store-listen", "off"]),
    ]);
    try {
      const proxied = { "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.8" };
      const login = await fetch(`${one.origin}/api/userservice/tokens`, {
        method: "POST",
        headers: { ...proxied, "content-type": "application/json", accept: "application/json" },
        body: jsonAuthRequest("q@example.org", PASSWORD, apiKey),
      });
      assert.equal(login.status, 200);
      const token = (await login.json()).auth_response.access_token;
      const current = `${CURRENT}?api_key=${apiKey}&api_token=${token}`;
      for (let i = 0; i < 2; i++) { // the second answer comes from two's cache
        const onTwo = await fetch(`${two.origin}${current}`, {
          headers: { ...proxied, accept: "application/json" },
        });
        assert.equal(onTwo.status, 200);
        assert.equal((await onTwo.json()).token_info.email, "q@example.org");
      }
      const { default: postgres } = await import("postgres");
      const admin = postgres(url, { max: 1, onnotice: () => {} });
      // A listener of our own: with --store-listen off, keygate sends no notification either.
      const heard: string[] = [];
      const listening = await admin.listen(GRANT_CHANNEL, (payload) => heard.push(payload));
      try {
        const names = await admin`SELECT application_name FROM pg_stat_activity
          WHERE datname = current_database() AND application_name LIKE 'keygate%'`;
        assert.ok(names.length >= 2, "both processes are connected");
        assert.deepEqual(
          names.filter((row) => row.application_name.endsWith("-listener")),
          [],
          "no LISTEN connection",
        );
        // The poll runs every 500 ms: within that plus a round trip, never through a notification.
        await revokeOnOneSeenOnTwo(one.origin, two.origin, current, proxied, 1500);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.deepEqual(heard, [], "a notification was sent");
      } finally {
        await listening.unlisten();
        await admin.end();
      }
      const metrics = await (await fetch(two.metricsUrl!)).text();
      const sample = (name: string) =>
        Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1]);
      assert.equal(sample("keygate_store_notifications_total"), 0, metrics);
      assert.equal(sample("keygate_store_listener_up"), 0);
    } finally {
      const statuses = await Promise.all([one.stop(), two.stop()]);
      assert.deepEqual(statuses.map((status) => status.code), [0, 0]);
    }
    for (const server of [one, two]) {
      assert.ok(
        !server.lines.some((line) => /"level":"(error|warn)"/.test(line)),
        server.lines.join("\n"),
      );
    }
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

Deno.test({
  name:
    "[pg e2e] two server processes on one database: a token from one works on the other until revoked there",
  ignore,
  sanitizeResources: false, // the servers' pipes close after their exit, at the end of the test
  async fn() {
    // A password in the URL (the test cluster trusts 127.0.0.1 and ignores it) that no log may show.
    const url = (await cluster!.createDatabase("procs")).replace("keygate@", "keygate:hunter2@");
    const apiKey = await addUserWithKey(url, "p@example.org", PASSWORD);
    const args = [
      "--behind-proxy",
      "on",
      "--store-staleness",
      "2s",
      "--metrics",
      "on",
      "--metrics-port",
      "0",
    ];
    const [one, two] = await Promise.all([
      startServerProcess(url, args),
      startServerProcess(url, args),
    ]);
    try {
      const listening = one.lines.find((line) => line.includes("keygate listening"))!;
      assert.equal(JSON.parse(listening).db, url.replace(":hunter2@", ":***@"));
      const proxied = { "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.7" };
      const login = await fetch(`${one.origin}/api/userservice/tokens`, {
        method: "POST",
        headers: { ...proxied, "content-type": "application/json", accept: "application/json" },
        body: jsonAuthRequest("p@example.org", PASSWORD, apiKey),
      });
      assert.equal(login.status, 200);
      const token = (await login.json()).auth_response.access_token;
      const current = `${CURRENT}?api_key=${apiKey}&api_token=${token}`;
      const onTwo = await fetch(`${two.origin}${current}`, {
        headers: { ...proxied, accept: "application/json" },
      });
      assert.equal(onTwo.status, 200);
      assert.equal((await onTwo.json()).token_info.email, "p@example.org");
      await revokeOnOneSeenOnTwo(one.origin, two.origin, current, proxied, 1000);
      const metrics = await (await fetch(two.metricsUrl!)).text();
      const sample = (name: string) =>
        Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1]);
      assert.ok(sample("keygate_store_notifications_total") >= 1, metrics);
      assert.equal(sample("keygate_store_listener_up"), 1);
      assert.equal(sample("keygate_store_connections_max"), 10);
      assert.ok(sample("keygate_store_grant_epoch_lag_seconds") < 2);
      assert.ok(
        sample('keygate_store_query_duration_seconds_count{kind="read",outcome="ok"}') >= 1,
      );
      // The revocation through one, from its commit to two having learned it: one host's clock.
      const delays = sample("keygate_store_change_delay_seconds_count");
      assert.ok(delays >= 1, metrics);
      assert.ok(sample("keygate_store_change_delay_seconds_sum") < delays * 1, metrics);
    } finally {
      const statuses = await Promise.all([one.stop(), two.stop()]);
      assert.deepEqual(statuses.map((status) => status.code), [0, 0]);
    }
    for (const server of [one, two]) {
      assert.ok(
        !server.lines.some((line) => /"level":"error"/.test(line)),
        server.lines.join("\n"),
      );
      assert.ok(!server.lines.join("\n").includes("hunter2"), "the password is never logged");
    }
  },
});

Deno.test({
  name: "[pg e2e] admin db migrate works on PostgreSQL; db backup points to pg_dump",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("admin");
    const migrated = await runAdmin(url, ["db", "migrate"]);
    assert.equal(migrated.code, 0, migrated.err);
    assert.equal(migrated.out, "Schema is up to date (0 user(s))");
    const backup = await runAdmin(url, ["db", "backup", "/tmp/never-written"]);
    assert.equal(backup.code, 1);
    assert.match(backup.err, /on PostgreSQL use pg_dump: pg_dump --format=custom/);
    assert.equal((await runAdmin(url, ["user", "add", "q@example.org"])).code, 0);
    const again = await runAdmin(url, ["db", "migrate"]);
    assert.equal(again.code, 0, again.err);
    assert.equal(again.out, "Schema is up to date (1 user(s))");
  },
});

Deno.test({
  name: "[pg e2e] KEYGATE_STORE_LISTEN=off: the admin CLI's revocations send no notification",
  ignore,
  async fn() {
    const url = await cluster!.createDatabase("clinolisten");
    const off = { env: { KEYGATE_STORE_LISTEN: "off" } };
    const { default: postgres } = await import("postgres");
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    const heard: string[] = [];
    try {
      assert.equal((await runAdmin(url, ["user", "add", "n@example.org"])).code, 0);
      const listening = await admin.listen(GRANT_CHANNEL, (payload) => heard.push(payload));
      assert.equal((await runAdmin(url, ["user", "disable", "n@example.org"], off)).code, 0);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(heard, [], "notified with KEYGATE_STORE_LISTEN=off");
      // The same write with notifications on is heard: the listener works.
      assert.equal((await runAdmin(url, ["user", "enable", "n@example.org"])).code, 0);
      assert.equal((await runAdmin(url, ["user", "disable", "n@example.org"])).code, 0);
      for (let i = 0; i < 50 && heard.length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(heard.length > 0, "no notification with KEYGATE_STORE_LISTEN unset");
      await listening.unlisten();
      const bad = await runAdmin(url, ["user", "list"], { env: { KEYGATE_STORE_LISTEN: "maybe" } });
      assert.equal(bad.code, 2);
      assert.match(bad.err, /KEYGATE_STORE_LISTEN: expected on, off/);
    } finally {
      await admin.end();
    }
  },
});

Deno.test({
  name:
    "[pg e2e] the server refuses, in one line without the password, an unreachable database and a newer schema",
  ignore,
  async fn() {
    const start = async (store: string) => {
      const output = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "main.ts", "--store", store, "--behind-proxy", "on", "--port", "0"],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code: output.code, err: new TextDecoder().decode(output.stderr) };
    };
    const unreachable = await start("postgres://kg:hunter2@127.0.0.1:1/keygate");
    assert.equal(unreachable.code, 1);
    assert.equal(
      unreachable.err,
      "keygate: Cannot open the store postgres://kg:***@127.0.0.1:1/keygate?sslmode=disable: " +
        "connect ECONNREFUSED 127.0.0.1:1; nothing accepts connections at 127.0.0.1:1: check " +
        "that PostgreSQL runs and listens on that address and port (listen_addresses, port)\n",
    );
    const url = await cluster!.createDatabase("newer");
    const { default: postgres } = await import("postgres");
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await migratePostgres(admin, [...POSTGRES_MIGRATIONS, {
        version: POSTGRES_MIGRATIONS.length + 1,
        name: "from a newer keygate",
        sql: "CREATE TABLE newer (id integer)",
      }]);
    } finally {
      await admin.end();
    }
    const newer = await start(url);
    assert.equal(newer.code, 1);
    const known = POSTGRES_MIGRATIONS.length;
    assert.match(
      newer.err,
      new RegExp(
        "^keygate: Cannot open the store postgres://keygate@127\\.0\\.0\\.1:\\d+/newer_\\w+" +
          `\\?sslmode=disable: Database schema version ${known + 1} is newer than this keygate ` +
          `knows \\(${known}\\): upgrade keygate\n$`,
      ),
    );
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
