/**
 * Failover: two keygate server processes on a multi-host `--store` URL naming a primary and its
 * synchronous streaming standby. The primary crashes (`pg_ctl stop -m immediate`), the standby
 * is promoted (`pg_ctl promote`): both fail closed in the gap, serve again on their own soon
 * after the promotion, and refuse every token whose revocation they acknowledged before the
 * crash; the admin CLI on the same URL reaches the new primary. Run by `deno task test:postgres`
 * (skipped in the SQLite run: it starts two clusters).
 */
import assert from "node:assert/strict";
import { jsonAuthRequest } from "../../_helpers/requests.ts";
import { TEST_STORE_NAME } from "../../_helpers/store.ts";
import {
  POSTGRES_SKIP,
  type PostgresCluster,
  startPostgres,
} from "../../_helpers/postgres_cluster.ts";
import {
  addUserWithKey,
  type ServerProcess,
  startServerProcess,
} from "../../_helpers/server_process.ts";
import { openPostgresClient } from "../../../src/store/postgres/connect.ts";
import { parseStoreUrl, type PostgresLocation } from "../../../src/store/store_url.ts";

const ignore = POSTGRES_SKIP !== false || TEST_STORE_NAME !== "postgres";
const primary: PostgresCluster | undefined = ignore ? undefined : await startPostgres();
const PASSWORD = "correct horse";
const CURRENT = "/api/secure/userservice/tokens/current";
const PROXIED = { "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.7" };
/** The bound the issue sets, from the promotion to serving again. */
const RECOVERY_BOUND_MS = 5000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A status, or 0 when the request failed or took more than 3 s (a hang is a failure too). */
async function statusOf(url: string, init: RequestInit = {}): Promise<number> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(3000) });
    await response.body?.cancel();
    return response.status;
  } catch {
    return 0;
  }
}

async function login(server: ServerProcess, email: string, apiKey: string): Promise<Response> {
  return await fetch(`${server.origin}/api/userservice/tokens`, {
    method: "POST",
    headers: { ...PROXIED, "content-type": "application/json", accept: "application/json" },
    body: jsonAuthRequest(email, PASSWORD, apiKey),
    signal: AbortSignal.timeout(3000),
  });
}

async function loginStatus(server: ServerProcess, email: string, apiKey: string) {
  try {
    const response = await login(server, email, apiKey);
    await response.body?.cancel();
    return response.status;
  } catch {
    return 0;
  }
}

async function issue(server: ServerProcess, email: string, apiKey: string): Promise<string> {
  const response = await login(server, email, apiKey);
  assert.equal(response.status, 200);
  return (await response.json()).auth_response.access_token;
}

/** Polls `check` every 20 ms until it holds; resolves to the milliseconds since `since`. */
async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  since: number,
  withinMs: number,
): Promise<number> {
  for (;;) {
    if (await check()) return performance.now() - since;
    if (performance.now() - since > withinMs) throw new Error(`Not ${what} within ${withinMs} ms`);
    await sleep(20);
  }
}

/** How the failover test reaches its two instances. */
interface Instances {
  servers: ServerProcess[];
  apiKey: string;
  /** The secure path, with the key and `token` in the query. */
  currentOf(token: string): string;
  /** The status of a secure request with `token` (0: failed or hung). */
  secure(server: ServerProcess, token: string): Promise<number>;
}

/**
 * After the promotion: every revocation acknowledged before the crash holds on both instances,
 * a new one crosses, and the admin CLI on the same URL (`store`) reaches the new primary.
 */
async function assertRevocationsHold(
  instances: Instances,
  revoked: string[],
  live: string,
  store: string,
): Promise<void> {
  const { servers, apiKey, currentOf, secure } = instances;
  // Every revocation acknowledged before the crash holds on both, and a new one crosses.
  // With --workers 2 a request may reach a worker that has not yet found the new primary:
  // it fails closed (503) a moment longer, then refuses (401); never 200.
  for (const server of servers) {
    for (const token of revoked) {
      await waitUntil(
        `revoked token refused with 401 (${server.origin})`,
        async () => {
          const status = await secure(server, token);
          assert.ok(status === 401 || status === 503, `revoked, after: ${status}`);
          return status === 401;
        },
        performance.now(),
        RECOVERY_BOUND_MS,
      );
    }
  }
  // A login, likewise possibly on the worker that is last to find the new primary.
  let after = "";
  await waitUntil(
    `a login (${servers[1].origin})`,
    async () => {
      const response = await login(servers[1], "f@example.org", apiKey);
      if (response.status === 200) {
        after = (await response.json()).auth_response.access_token;
        return true;
      }
      await response.body?.cancel();
      assert.equal(response.status, 503, "a login after the promotion");
      return false;
    },
    performance.now(),
    RECOVERY_BOUND_MS,
  );
  assert.equal(await secure(servers[0], after), 200);
  assert.equal(
    await statusOf(`${servers[1].origin}${currentOf(after)}`, {
      method: "DELETE",
      headers: PROXIED,
    }),
    204,
  );
  await waitUntil(
    "the new revocation refused by the other instance",
    async () => await secure(servers[0], after) === 401,
    performance.now(),
    1000,
  );
  // The admin CLI, as an operator runs it with the same URL, reaches the new primary too.
  const admin = await new Deno.Command(Deno.execPath(), {
    args: ["task", "admin", "user", "disable", "f@example.org"],
    env: { KEYGATE_STORE: store },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const adminOut = new TextDecoder().decode(admin.stdout);
  const adminErr = new TextDecoder().decode(admin.stderr);
  assert.equal(admin.code, 0, adminErr);
  assert.ok(!(adminOut + adminErr).includes("hunter2"), "the password is never shown");
  await waitUntil(
    "the disabled user refused by both instances",
    async () =>
      (await Promise.all(servers.map((server) => secure(server, live))))
        .every((status) => status === 401),
    performance.now(),
    1000,
  );
}

/**
 * The servers' logs after the failover: no password, no error but 503s, a listener's loss
 * logged once per listener, the store URL masked.
 */
function assertFailoverLogs(servers: ServerProcess[]): void {
  for (const [server, listeners] of [[servers[0], 1], [servers[1], 3]] as const) {
    const log = server.lines.join("\n");
    assert.ok(!log.includes("hunter2"), "the password is never logged");
    // 503s are logged as errors; anything else (a 500, a crash) would be a bug.
    const errors = server.lines.filter((line) => /"level":"error"/.test(line));
    assert.deepEqual(errors.filter((line) => !/"error":"service_unavailable"/.test(line)), []);
    // A listener's loss is logged once (the main thread's, and each worker's), not at each
    // attempt to listen again in the gap.
    assert.equal(server.lines.filter((line) => /listener lost/.test(line)).length, listeners);
    assert.match(log, /"db":"postgres:\/\/keygate:\*\*\*@127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\//);
  }
}

Deno.test({
  name:
    "[pg failover] after a run of refused connections, a pool connects within 1 s of the return",
  ignore,
  async fn() {
    const url = await primary!.createDatabase("backoff");
    const sql = openPostgresClient(parseStoreUrl(url) as PostgresLocation, { max: 1 });
    try {
      await sql`SELECT 1`;
      await primary!.pause();
      // postgres.js waits longer before each new attempt: by the 7th, 4 to 7 s by default.
      for (let i = 0; i < 6; i++) await sql`SELECT 1`.catch(() => {});
      await primary!.resume();
      const started = performance.now();
      await sql`SELECT 1`;
      const tookMs = performance.now() - started;
      assert.ok(tookMs < 1000, `took ${tookMs} ms`);
    } finally {
      await sql.end({ timeout: 0 });
    }
  },
});

Deno.test({
  name:
    "[pg failover] primary crashed, standby promoted: two instances fail closed, serve again within 5 s, keep every revocation",
  ignore,
  sanitizeResources: false, // the servers' pipes close after their exit, at the end of the test
  async fn() {
    const url = await primary!.createDatabase("failover");
    const database = new URL(url.replace(/^postgres:/, "http:")).pathname.slice(1);
    const apiKey = await addUserWithKey(url, "f@example.org", PASSWORD);
    const standby = await primary!.startStandby({ synchronous: true });
    const store = `postgres://keygate:hunter2@127.0.0.1:${primary!.port},` +
      `127.0.0.1:${standby.port}/${database}?sslmode=disable&target_session_attrs=read-write`;
    const args = ["--behind-proxy", "on", "--store-staleness", "1s"];
    const servers = await Promise.all([
      startServerProcess(store, args),
      // As docs/postgres.md says: `KEYGATE_STORE=… deno task start`.
      startServerProcess(store, [...args, "--workers", "2"], { task: true, storeInEnv: true }),
    ]);
    const currentOf = (token: string) => `${CURRENT}?api_key=${apiKey}&api_token=${token}`;
    const secure = (server: ServerProcess, token: string) =>
      statusOf(`${server.origin}${currentOf(token)}`, { headers: PROXIED });
    let probing = true;
    const revokedSeen: string[] = [];
    let prober: Promise<void> | undefined;
    try {
      // Issued first: a login commits without waiting for the standby (durability "grants"),
      // and only a later revocation's commit, which waits, carries it over for sure.
      const live = await issue(servers[0], "f@example.org", apiKey);
      // Six tokens revoked (three through each instance), acknowledged before the crash.
      const revoked: string[] = [];
      for (let i = 0; i < 6; i++) {
        const server = servers[i % 2];
        const token = await issue(servers[(i + 1) % 2], "f@example.org", apiKey);
        assert.equal(await secure(server, token), 200);
        const status = await statusOf(`${server.origin}${currentOf(token)}`, {
          method: "DELETE",
          headers: PROXIED,
        });
        assert.equal(status, 204);
        revoked.push(token);
      }
      for (const server of servers) assert.equal(await secure(server, live), 200);

      // From now on, a revoked token answered 200 by either instance is a failure.
      prober = (async () => {
        while (probing) {
          for (const server of servers) {
            for (const token of revoked) {
              const status = await secure(server, token);
              if (status === 200) revokedSeen.push(`${server.origin} ${token.slice(0, 6)}`);
            }
          }
          await sleep(5);
        }
      })();

      const crashedAt = performance.now();
      await primary!.crash();
      // Both fail closed: secure requests 503 once the staleness bound (1 s) has passed.
      const failedClosedMs = await waitUntil(
        "failed closed on both",
        async () =>
          (await Promise.all(servers.map((server) => secure(server, live))))
            .every((status) => status === 503),
        crashedAt,
        3000,
      );
      // The gap: nothing answers 200, nothing hangs or fails otherwise.
      const gapEnds = performance.now() + 1000;
      while (performance.now() < gapEnds) {
        for (const server of servers) {
          assert.equal(await secure(server, live), 503, `in the gap, secure on ${server.origin}`);
          const status = await loginStatus(server, "f@example.org", apiKey);
          assert.equal(status, 503, `in the gap, login on ${server.origin}`);
        }
      }

      const promotedAt = performance.now();
      const lastStatuses = new Map<string, string>();
      await standby.promote();
      const recoveredMs = await Promise.all(servers.map((server) =>
        waitUntil(
          `serving again (${server.origin})`,
          async () => {
            const statuses = [
              await secure(server, live),
              await loginStatus(server, "f@example.org", apiKey),
            ];
            lastStatuses.set(server.origin, statuses.join(" "));
            return statuses.every((status) => status === 200);
          },
          promotedAt,
          RECOVERY_BOUND_MS,
        ).catch((error) => {
          throw new Error(`${error.message}: last ${lastStatuses.get(server.origin)}`);
        })
      ));
      console.log(
        `failover: fail closed ${failedClosedMs.toFixed(0)} ms after the crash; ` +
          `serving ${recoveredMs.map((ms) => ms.toFixed(0)).join(" and ")} ms after the promotion`,
      );

      await assertRevocationsHold({ servers, apiKey, currentOf, secure }, revoked, live, store);
    } finally {
      probing = false;
      await prober;
      const statuses = await Promise.all(servers.map((server) => server.stop()));
      await standby.stop();
      assert.deepEqual(statuses.map((status) => status.code), [0, 0]);
    }
    assert.deepEqual(revokedSeen, [], "a revoked token was answered 200");
    assertFailoverLogs(servers);
  },
});

Deno.test({
  name: "[pg failover] with no writable primary in the host list, the server stops in one line",
  ignore,
  async fn() {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["task", "start", "--behind-proxy", "on", "--port", "0"],
      env: { KEYGATE_STORE: "postgres://kg:hunter2@127.0.0.1:1,127.0.0.1:2/keygate" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(output.code, 1);
    assert.match(
      new TextDecoder().decode(output.stderr),
      /\nkeygate: Cannot open the store postgres:\/\/kg:\*\*\*@127\.0\.0\.1:1,127\.0\.0\.1:2\/keygate\?sslmode=disable&target_session_attrs=read-write: No server of the store URL is a writable primary\n$/,
    );
  },
});

Deno.test({ name: "[pg failover] stop the cluster", ignore, fn: () => primary!.stop() });
