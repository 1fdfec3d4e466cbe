/**
 * Login bursts against the real server process: logins queue while their
 * expected wait for a password check is within `--login-queue-wait`, and
 * beyond it get 503 `service_busy` with a computed `Retry-After`, never a
 * timeout; the server's memory stays within its documented bound
 * (docs/operations.md, "Login bursts").
 *
 * The logins here use the production argon2id cost (there is no cheaper test
 * setting): 15–17 ms a hash on the reference machine, 30–250 ms on the shared
 * machine these tests were written on. Admission is
 * by time, so even the 2,000-login burst lasts about the bound: the hashes the
 * bound admits, then the rest are refused at once.
 *
 * A burst that must all answer 200 needs a bound its hashing fits in. On the
 * idle reference machine the default 5 s holds 100 logins six times over (100
 * × 16 ms ÷ 2 cores = 0.8 s). Test machines are often shared: there the hash
 * time swings several-fold within seconds, and the test's own client (TLS at
 * normal priority, on the same cores) slows the idle-class hashing after the
 * logins were admitted. So those tests measure a hash first and set the bound
 * to four times the burst's need, at least the default: {@link boundFor}.
 *
 * Each test runs on the suite's store (SQLite, or PostgreSQL with
 * `KEYGATE_TEST_STORE=postgres`); the two-instance test on PostgreSQL only.
 */
import assert from "node:assert/strict";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { TEST_STORE_NAME } from "../../_helpers/store.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { testCertificate } from "../../_helpers/tls_server.ts";
import { POSTGRES_SKIP, sharedPostgres } from "../../_helpers/postgres_cluster.ts";
import {
  addUserWithKey,
  type ServerProcess,
  startServerProcess,
} from "../../_helpers/server_process.ts";

const EMAIL = "burst@example.org";
const PASSWORD = "burst test pw";

/** The documented bound on the server's resident memory: operations.md, "Login bursts". */
const BASE_RSS_MIB = 160;
const ARGON2_MIB_PER_THREAD = 20;
const QUEUED_LOGIN_KIB = 64;

/** This machine's hash time now, in ms: a few hashes in the pool, as the server runs them. */
async function measureHashMs(): Promise<number> {
  const hasher = createPasswordHasher({ workers: 1 });
  try {
    for (let i = 0; i < 4; i++) await hasher.hash("x");
    return hasher.readQueue().hashMs;
  } finally {
    hasher.close();
  }
}

/**
 * The bound, in whole seconds, for `logins` at once on this machine's cores: four times the time
 * their hashes take now, and at least the default 5 s (the default on the reference machine).
 */
async function boundFor(logins: number): Promise<number> {
  const hashMs = await measureHashMs();
  const cores = navigator.hardwareConcurrency;
  // At most the setting's own limit, a minute.
  const seconds = Math.min(60, Math.max(5, Math.ceil((4 * logins * hashMs) / cores / 1000)));
  console.log(`a hash takes ${Math.round(hashMs)} ms: bound ${seconds} s for ${logins} logins`);
  return seconds;
}

/**
 * How long a client of an admitted burst waits before failing the test: a guard against a hang,
 * not a measure. The bound is on a login's expected wait when it is admitted (docs/operations.md,
 * "Login bursts"), not on its wall time: the hashes run at idle priority, and on a loaded machine
 * other work starves them after admission for as long as it likes, so a wall-clock check of each
 * answer against the bound fails there (it did, in CI) without the server doing anything wrong.
 * What the bound decides is admission: a login over it is refused at once with 503, so a burst
 * that answers 200 throughout was admitted within it, every login.
 */
function hangGuardMs(boundSeconds: number): number {
  return Math.max(120_000, boundSeconds * 10_000);
}

/** What a login got, and how long it took from sending to the whole answer. */
interface Outcome {
  status: number;
  ms: number;
  retryAfter: string | null;
  body: string;
}

/** Files for one test: the store (SQLite file or PostgreSQL database) and a TLS pair. */
async function setUp(name: string) {
  const files = tempDbPath();
  const store = TEST_STORE_NAME === "postgres"
    ? await (await sharedPostgres()).createDatabase(name)
    : files.path;
  const { cert, key } = await testCertificate();
  await Deno.writeTextFile(`${files.dir}/cert.pem`, cert);
  await Deno.writeTextFile(`${files.dir}/key.pem`, key);
  const apiKey = await addUserWithKey(store, EMAIL, PASSWORD);
  return {
    store,
    cert,
    apiKey,
    tls: ["--cert", `${files.dir}/cert.pem`, "--key", `${files.dir}/key.pem`],
    cleanup: () => files.cleanup(),
  };
}

/** Sends `count` logins at once through `client`, each failing the test after `timeoutMs`. */
function burst(
  client: Deno.HttpClient,
  origins: string[],
  apiKey: string,
  count: number,
  timeoutMs: number,
): Promise<Outcome[]> {
  const body = JSON.stringify({
    auth_request: { user: { email: EMAIL, password: PASSWORD }, api_key: apiKey },
  });
  return Promise.all(Array.from({ length: count }, async (_, i) => {
    const started = performance.now();
    const response = await fetch(`${origins[i % origins.length]}/api/userservice/tokens`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body,
      client,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    return {
      status: response.status,
      ms: performance.now() - started,
      retryAfter: response.headers.get("retry-after"),
      body: text,
    };
  }));
}

/**
 * A few logins one after another first, as on a server already up: the password workers have
 * started, and the pool has measured how long a hash takes on this (shared, busy) machine.
 */
async function warmUp(client: Deno.HttpClient, origin: string, apiKey: string) {
  for (let i = 0; i < 4; i++) {
    const [outcome] = await burst(client, [origin], apiKey, 1, 30_000);
    assert.equal(outcome.status, 200, outcome.body);
  }
}

/** A line of the server's /proc/PID/status, in KiB: `VmRSS` now, `VmHWM` at its peak. */
async function readMemoryKib(server: ServerProcess, field: "VmRSS" | "VmHWM"): Promise<number> {
  // Deno lets only --allow-all read /proc directly; the test task may run programs.
  const output = await new Deno.Command("cat", {
    args: [`/proc/${server.child.pid}/status`],
    stdout: "piped",
  }).output();
  const status = new TextDecoder().decode(output.stdout);
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
  assert.ok(match, status);
  return Number(match[1]);
}

/** Per status: how many, and the slowest in ms. */
function summary(outcomes: Outcome[]): string {
  const statuses = new Map<number, { count: number; slowestMs: number }>();
  for (const { status, ms } of outcomes) {
    const seen = statuses.get(status) ?? { count: 0, slowestMs: 0 };
    statuses.set(status, { count: seen.count + 1, slowestMs: Math.max(seen.slowestMs, ms) });
  }
  return [...statuses].map(([status, { count, slowestMs }]) =>
    `${count} × ${status} (slowest ${Math.round(slowestMs)} ms)`
  ).join(", ");
}

// With --workers 2 the request workers' logins queue on the main thread's one pool, admitted by
// the same bound.
for (const workers of [[], ["--workers", "2"]]) {
  Deno.test({
    name: `[server] 100 concurrent logins on one instance${
      workers.length === 0 ? "" : ` (${workers.join(" ")})`
    } all answer 200, each within the bound`,
    sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
    async fn() {
      const setup = await setUp("burst_100");
      const bound = await boundFor(100);
      const server = await startServerProcess(setup.store, [
        ...setup.tls,
        ...workers,
        "--login-queue-wait",
        `${bound}s`,
      ]);
      const client = Deno.createHttpClient({ caCerts: [setup.cert] });
      try {
        await warmUp(client, server.origin, setup.apiKey);
        const outcomes = await burst(
          client,
          [server.origin],
          setup.apiKey,
          100,
          hangGuardMs(bound),
        );
        console.log(`100 logins ${workers.join(" ")}: ${summary(outcomes)}`);
        // Each admitted within the bound (a login over it is a 503 at once: hangGuardMs), none
        // refused, each with its own token.
        for (const outcome of outcomes) {
          assert.equal(outcome.status, 200, `${summary(outcomes)}: ${outcome.body}`);
          assert.match(JSON.parse(outcome.body).auth_response.access_token, /\S/);
        }
        const tokens = outcomes.map((o) => JSON.parse(o.body).auth_response.access_token);
        assert.equal(new Set(tokens).size, 100, "100 distinct tokens");
      } finally {
        client.close();
        assert.equal((await server.stop()).code, 0);
        setup.cleanup();
      }
    },
  });
}

Deno.test({
  name:
    "[server] 2,000 concurrent logins answer 200 or 503 with a computed Retry-After, never time out, and memory stays bounded",
  sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
  async fn() {
    const setup = await setUp("burst_2000");
    const server = await startServerProcess(setup.store, setup.tls);
    const client = Deno.createHttpClient({ caCerts: [setup.cert] });
    try {
      await warmUp(client, server.origin, setup.apiKey);
      const before = await readMemoryKib(server, "VmRSS");
      // A login that waited in a queue of 5 s and then had its answer committed, with 2,000
      // connections' handshakes on 2 cores: far within 60 s, which would count as a timeout.
      const outcomes = await burst(client, [server.origin], setup.apiKey, 2000, 60_000);
      const peak = await readMemoryKib(server, "VmHWM");
      const threads = navigator.hardwareConcurrency;
      const boundMib = BASE_RSS_MIB + ARGON2_MIB_PER_THREAD * threads +
        (QUEUED_LOGIN_KIB * 2000) / 1024;
      console.log(
        `2000 logins: ${summary(outcomes)}; RSS ${Math.round(before / 1024)} MiB before, peak ${
          Math.round(peak / 1024)
        } MiB, bound ${boundMib} MiB`,
      );
      let ok = 0;
      for (const outcome of outcomes) {
        if (outcome.status === 200) {
          ok++;
          assert.match(JSON.parse(outcome.body).auth_response.access_token, /\S/);
          continue;
        }
        assert.equal(outcome.status, 503, `${summary(outcomes)}: ${outcome.body}`);
        assert.equal(
          JSON.parse(outcome.body).error_response.errors.error[0].error_code,
          "service_busy",
        );
        assert.match(outcome.retryAfter ?? "", /^[1-9]\d*$/);
      }
      // How many the bound admits depends on the measured hash time: 5 s × 2 threads ÷ 16 ms is
      // 625 on the idle 2-core reference machine, fewer on a busy one.
      assert.ok(ok >= 10, `the bound admitted a queue's worth: ${summary(outcomes)}`);
      // Refused while the queue was full, a login is told to come back when it has drained: about
      // the bound's worth of hashes (more if hashes slowed down meanwhile), not a constant 1 s.
      // Where the connections' handshakes pace the logins below the hashing rate (a quiet machine),
      // the queue never reaches the bound and all 2,000 are admitted: then there is no refusal to
      // look at here, and tests/passwords/passwords_test.ts pins the computed Retry-After.
      const retryAfters = outcomes.filter((o) => o.status === 503).map((o) => Number(o.retryAfter));
      if (retryAfters.length > 0) {
        assert.ok(Math.max(...retryAfters) >= 2, `Retry-After up to ${Math.max(...retryAfters)}`);
      }
      assert.ok(peak / 1024 <= boundMib, `peak RSS ${peak / 1024} MiB > ${boundMib} MiB`);
    } finally {
      client.close();
      assert.equal((await server.stop()).code, 0);
      setup.cleanup();
    }
  },
});

Deno.test({
  name:
    "[pg e2e] 200 concurrent logins across two instances on one PostgreSQL all answer 200, each within the bound",
  ignore: POSTGRES_SKIP !== false || TEST_STORE_NAME !== "postgres",
  sanitizeResources: false, // the servers' pipes close after their exit, at the end of the test
  async fn() {
    const setup = await setUp("burst_200");
    // 200 × 16 ms ÷ 2 cores is 1.6 s of hashing on the reference machine (docs/operations.md,
    // "Login bursts"), within the default bound. Each instance believes it has every core; its
    // measured hash time doubles once the other hashes too.
    const bound = await boundFor(200);
    const args = [...setup.tls, "--login-queue-wait", `${bound}s`];
    const servers = [
      await startServerProcess(setup.store, args),
      await startServerProcess(setup.store, args),
    ];
    const client = Deno.createHttpClient({ caCerts: [setup.cert] });
    try {
      for (const server of servers) await warmUp(client, server.origin, setup.apiKey);
      const origins = servers.map((server) => server.origin);
      const outcomes = await burst(client, origins, setup.apiKey, 200, hangGuardMs(bound));
      console.log(`200 logins on two instances: ${summary(outcomes)}`);
      // Each admitted within the bound by its instance (see hangGuardMs), none refused.
      for (const outcome of outcomes) {
        assert.equal(outcome.status, 200, `${summary(outcomes)}: ${outcome.body}`);
        assert.match(JSON.parse(outcome.body).auth_response.access_token, /\S/);
      }
    } finally {
      client.close();
      for (const server of servers) assert.equal((await server.stop()).code, 0);
      setup.cleanup();
    }
  },
});

Deno.test({
  name: "[server] logins whose clients went away while queued leave the queue and cost no hash",
  sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
  async fn() {
    const setup = await setUp("burst_gone");
    const server = await startServerProcess(setup.store, [
      ...setup.tls,
      "--login-queue-wait",
      "60s",
      "--metrics",
      "on",
      "--metrics-port",
      "0",
    ]);
    const client = Deno.createHttpClient({ caCerts: [setup.cert] });
    try {
      await warmUp(client, server.origin, setup.apiKey);
      // Enough logins for about 6 s of hashing queue, and their clients give up after 1 s, while
      // most are still waiting.
      const hashMs = await measureHashMs();
      const logins = Math.min(
        1500,
        Math.max(300, Math.ceil((6000 * navigator.hardwareConcurrency) / hashMs)),
      );
      const gone = await Promise.allSettled(
        [burst(client, [server.origin], setup.apiKey, logins, 1000)],
      );
      assert.equal(gone[0].status, "rejected");
      // The jobs workers already held run to the end, and the rest leave without a hash. Counted,
      // not timed (idle-priority hashes on a loaded machine take what they get): a login that is
      // hashed is answered with a token even when its client has gone, so had the queue kept the
      // gone logins, about all of them would have been issued one.
      const metric = async (name: string) => {
        const text = await (await fetch(server.metricsUrl!)).text();
        return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
      };
      let out = await metric("keygate_login_queue_jobs");
      // A guard against a hang, not a measure.
      for (let waited = 0; out > 0 && waited < 60_000; waited += 100) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        out = await metric("keygate_login_queue_jobs");
      }
      assert.equal(out, 0, `${logins} logins: ${out} still out`);
      const hashed = await metric("keygate_tokens_issued_total") - 4; // but the warm-up's
      console.log(`${logins} logins, their clients gone after 1 s: ${hashed} hashed`);
      assert.ok(
        hashed < logins / 2,
        `${hashed} of ${logins} logins hashed after their clients left`,
      );
      assert.ok(await metric("keygate_password_hash_seconds") > 0);
      // A login now finds the queue empty.
      const [outcome] = await burst(client, [server.origin], setup.apiKey, 1, 30_000);
      assert.equal(outcome.status, 200, outcome.body);
    } finally {
      client.close();
      assert.equal((await server.stop()).code, 0);
      setup.cleanup();
    }
  },
});
