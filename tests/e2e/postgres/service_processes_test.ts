/**
 * keygate server processes and the admin CLI on one PostgreSQL database: a token crosses
 * processes and a revocation reaches the other within its bound, with and without
 * notifications; the CLI's migrate and backup commands; a server that cannot use the database
 * refuses to start in one line (two instances in one process: service_test.ts).
 */
import assert from "node:assert/strict";
import { GRANT_CHANNEL } from "../../../src/store/postgres/grant_epoch.ts";
import { jsonAuthRequest } from "../../_helpers/requests.ts";
import { startTestCluster } from "../../_helpers/postgres_cluster.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";
import { migratePostgres } from "../../../src/store/postgres/migrate.ts";
import { POSTGRES_MIGRATIONS } from "../../../src/store/postgres/schema.ts";
import { runAdmin } from "../../_helpers/admin_cli.ts";
import { waitForStatus } from "../../_helpers/wait_for_status.ts";

const cluster = await startTestCluster();
const ignore = cluster === undefined;
const PASSWORD = "correct horse";
const CURRENT = "/api/secure/userservice/tokens/current";

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
      // Two learned the revocation through one by reading its row from the change record.
      assert.ok(sample("keygate_store_change_polls_total") >= 1, metrics);
      assert.ok(sample("keygate_store_change_rows_total") >= 1, metrics);
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

Deno.test({ name: "[pg] stop the cluster", ignore, fn: () => cluster!.stop() });
