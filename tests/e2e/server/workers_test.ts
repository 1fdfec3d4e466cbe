/**
 * `--workers N`: request workers sharing one port. Real server processes over
 * real TLS for exact revocation across workers and the drain on SIGTERM; the
 * worker pool in process, with a worker module that dies once, for restarts.
 *
 * The kernel spreads connections among the workers, so every request here
 * opens a connection of its own, and `x-request-id` (whose prefix each worker
 * draws at start) tells which worker answered.
 */
import assert from "node:assert/strict";
import type { Config } from "../../../src/config/settings.ts";
import { readConfig } from "../../../src/config/read_config.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { createWorkerPool } from "../../../src/server/worker_pool.ts";
import { openSqliteStore } from "../../../src/store/sqlite/sqlite_store.ts";
import { runAdmin } from "../../_helpers/admin_cli.ts";
import { createCapturingLogger } from "../../_helpers/capturing_logger.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { testCertificate } from "../../_helpers/tls_server.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";
import { POSTGRES_SKIP, sharedPostgres } from "../../_helpers/postgres_cluster.ts";

const PASSWORD = "workers test pw";
const CURRENT = "/api/secure/userservice/tokens/current";

/** One request on a connection of its own; the worker is the request id's prefix. */
async function fetchFresh(cert: string | undefined, url: string, init: RequestInit = {}) {
  const client = Deno.createHttpClient(cert === undefined ? {} : { caCerts: [cert] });
  try {
    const response = await fetch(url, { ...init, client });
    const body = await response.text();
    const worker = (response.headers.get("x-request-id") ?? "").split("-")[0];
    return { status: response.status, type: response.headers.get("content-type"), body, worker };
  } finally {
    client.close();
  }
}

/** Revokes the token of `headers` by a DELETE of the current token, through whichever worker. */
function deleteCurrentToken(
  cert: string | undefined,
  url: string,
  headers: Record<string, string>,
): () => Promise<void> {
  return async () => {
    const revoked = await fetchFresh(cert, url, { method: "DELETE", headers });
    assert.equal(revoked.status, 204, revoked.body);
  };
}

/**
 * Has both workers serve the token of `headers` at `url` (so both cache it), revokes it with
 * `revoke` (through one worker, or the admin API on the main thread), and checks that every
 * worker refuses it from the next request on. Returns how many requests were allowed and refused.
 */
async function assertRevokedOnEveryWorker(
  cert: string | undefined,
  url: string,
  headers: Record<string, string>,
  revoke: () => Promise<void>,
): Promise<{ allowed: number; refused: number }> {
  const allowedBy = new Set<string>();
  let allowed = 0;
  for (let i = 0; i < 200 && allowedBy.size < 2; i++) {
    const response = await fetchFresh(cert, url, { headers });
    assert.equal(response.status, 200, response.body);
    allowedBy.add(response.worker);
    allowed++;
  }
  assert.equal(allowedBy.size, 2, "both workers answered");
  await revoke();
  const refusedBy = new Set<string>();
  let refused = 0;
  for (let i = 0; i < 200 && refusedBy.size < 2; i++) {
    const response = await fetchFresh(cert, url, { headers });
    assert.equal(response.status, 401, `request ${i} after the revocation: ${response.body}`);
    assert.equal(response.type, "application/json; charset=utf-8");
    assert.equal(
      JSON.parse(response.body).error_response.errors.error[0].error_code,
      "invalid_token",
    );
    refusedBy.add(response.worker);
    refused++;
  }
  assert.deepEqual(refusedBy, allowedBy, "both workers refused it");
  return { allowed, refused };
}

async function issueToken(cert: string, origin: string, email: string, apiKey: string) {
  const response = await fetchFresh(cert, `${origin}/api/userservice/tokens`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({
      auth_request: { user: { email, password: PASSWORD }, api_key: apiKey },
    }),
  });
  assert.equal(response.status, 200, response.body);
  return JSON.parse(response.body).auth_response.access_token as string;
}

Deno.test("[server] --workers 2: a token revoked through one worker is refused by every worker on the next request", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await addUserWithKey(db.path, "ops@example.org", PASSWORD);
    const server = await startServerProcess(db.path, [
      "--workers",
      "2",
      "--metrics",
      "on",
      "--metrics-port",
      "0",
    ]);
    let allowed = 0;
    try {
      assert.ok(server.lines.some((line) => line.includes('"workers":2')), server.lines.join("\n"));
      const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
      const token = await issueToken(cert, server.origin, "ops@example.org", apiKey);
      const url = `${server.origin}${CURRENT}`;
      const headers = {
        "x-api-key": apiKey,
        authorization: `Bearer ${token}`,
        accept: "application/json",
      };

      const counted = await assertRevokedOnEveryWorker(
        cert,
        url,
        headers,
        deleteCurrentToken(cert, url, headers),
      );
      allowed += counted.allowed;
      const refused = counted.refused;

      // One /metrics answer counts the requests of both workers (the DELETE was allowed too).
      const metrics = await (await fetch(server.metricsUrl!)).text();
      assert.match(
        metrics,
        new RegExp(
          `keygate_secure_requests_total\\{outcome="allowed",reason="ok"\\} ${allowed + 1}\n`,
        ),
      );
      assert.match(
        metrics,
        new RegExp(
          `keygate_secure_requests_total\\{outcome="denied",reason="invalid_token"\\} ${refused}\n`,
        ),
      );
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
    const store = openSqliteStore(db.path);
    try {
      assert.equal(await store.countLiveTokens(Date.now()), 0);
      // Each worker wrote its own key uses when it drained: none lost, none counted twice.
      const [key] = await store.listApiKeys();
      // The login, every allowed GET and the DELETE used the key.
      assert.equal(key.useCount, allowed + 2);
    } finally {
      await store.closeStore();
    }
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --workers 2: SIGTERM lets the requests in flight on every worker finish, then exits 0", async () => {
  const db = tempDbPath();
  let arrived = 0;
  const backend = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async () => {
    arrived++;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return new Response("slow answer");
  });
  try {
    const apiKey = await addUserWithKey(db.path, "ops@example.org", PASSWORD);
    const server = await startServerProcess(db.path, [
      "--workers",
      "2",
      "--upstream",
      `http://127.0.0.1:${backend.addr.port}`,
    ]);
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const token = await issueToken(cert, server.origin, "ops@example.org", apiKey);
    const inFlight = Array.from(
      { length: 16 },
      () =>
        fetchFresh(cert, `${server.origin}/api/secure/reports`, {
          headers: { "x-api-key": apiKey, authorization: `Bearer ${token}` },
        }),
    );
    for (let i = 0; i < 100 && arrived < 16; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(arrived, 16, "every request reached the backend before the signal");
    const status = await server.stop();
    const answers = await Promise.all(inFlight);
    for (const answer of answers) {
      assert.equal(answer.status, 200);
      assert.equal(answer.body, "slow answer");
    }
    assert.equal(
      new Set(answers.map((a) => a.worker)).size,
      2,
      "both workers had requests in flight",
    );
    assert.equal(status.code, 0);
    assert.ok(server.lines.some((line) => line.includes("shutting down")));
    assert.ok(server.lines.at(-1)?.includes('"stopped"'), server.lines.at(-1));
    assert.ok(!server.lines.some((line) => line.includes("deadline passed")));
  } finally {
    await backend.shutdown();
    db.cleanup();
  }
});

Deno.test("[server] --workers 2: failed logins on both workers count against one throttle", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await addUserWithKey(db.path, "ops@example.org", PASSWORD);
    const server = await startServerProcess(db.path, ["--workers", "2"]);
    try {
      const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
      const login = (password: string) =>
        fetchFresh(cert, `${server.origin}/api/userservice/tokens`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify({
            auth_request: { user: { email: "ops@example.org", password }, api_key: apiKey },
          }),
        });
      // The account rule blocks after 5 failures, whichever workers counted them...
      for (let i = 0; i < 5; i++) {
        const response = await login("wrong password");
        assert.equal(response.status, 401, response.body);
      }
      // ...and then every worker refuses even the right password.
      const workers = new Set<string>();
      for (let i = 0; i < 60 && workers.size < 2; i++) {
        const blocked = await login(PASSWORD);
        assert.equal(blocked.status, 429, blocked.body);
        assert.equal(
          JSON.parse(blocked.body).error_response.errors.error[0].error_code,
          "too_many_attempts",
        );
        workers.add(blocked.worker);
      }
      assert.equal(workers.size, 2, "both workers refused");
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
    const store = openSqliteStore(db.path);
    try {
      const rows = await store.listLoginFailures(Date.now());
      const account = rows.find((row) => row.subject.startsWith("key:"));
      assert.equal(account?.failures, 5);
    } finally {
      await store.closeStore();
    }
  } finally {
    db.cleanup();
  }
});

Deno.test("a request worker that dies is logged and restarted, and the port is served by two again", async () => {
  const db = tempDbPath();
  const marker = `${db.dir}/died`;
  Deno.env.set("KEYGATE_TEST_DIE_ONCE", marker);
  const { logger, lines } = createCapturingLogger();
  const hasher = createPasswordHasher({ workers: 1 });
  const { cert, key } = await testCertificate();
  const config = readConfig(
    [
      "--db",
      db.path,
      "--port",
      "0",
      "--hostname",
      "127.0.0.1",
      "--workers",
      "2",
      "--log-level",
      "off",
    ],
    {},
  ) as Config;
  const pool = createWorkerPool({
    config,
    tls: { cert, key },
    hasher,
    logger,
    workerUrl: new URL("../../_helpers/dying_worker.ts", import.meta.url),
  });
  try {
    const { port } = await pool.start();
    for (let i = 0; i < 100 && pool.restarts === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(pool.restarts, 1);
    const died = lines.find((line) => line.includes("died: restarting it"));
    assert.ok(died, lines.join("\n"));
    assert.match(died, /"reason":"[^"]*worker died on purpose/);
    for (let i = 0; i < 100 && !lines.some((line) => line.includes("restarted")); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.ok(lines.some((line) => line.includes("request worker") && line.includes("restarted")));
    const workers = new Set<string>();
    for (let i = 0; i < 200 && workers.size < 2; i++) {
      const response = await fetchFresh(cert, `https://localhost:${port}/healthz`);
      assert.equal(response.status, 200, response.body);
      workers.add(response.worker);
    }
    assert.equal(workers.size, 2);
    assert.equal(await pool.drain(5000), true);
  } finally {
    Deno.env.delete("KEYGATE_TEST_DIE_ONCE");
    hasher.close();
    db.cleanup();
  }
});

Deno.test("[server] --workers 2 is refused at start-up, saying why, without --unstable-net or under an application's own routes", async () => {
  const db = tempDbPath();
  try {
    // deno.json turns --unstable-net on: a configuration with only its imports leaves it off.
    const project = JSON.parse(await Deno.readTextFile("deno.json"));
    const plainConfig = `${db.dir}/deno.json`;
    await Deno.writeTextFile(plainConfig, JSON.stringify({ imports: project.imports }));
    const run = async (config: string, entry: string) => {
      const output = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--config",
          config,
          "--lock",
          "deno.lock",
          "--frozen",
          "--allow-all",
          entry,
          "--db",
          db.path,
          "--port",
          "0",
          "--hostname",
          "127.0.0.1",
          "--workers",
          "2",
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code: output.code, stderr: new TextDecoder().decode(output.stderr) };
    };
    const noFlag = await run(plainConfig, "main.ts");
    assert.equal(noFlag.code, 2, noFlag.stderr);
    assert.equal(
      noFlag.stderr,
      "keygate: --workers above 1 needs Deno's --unstable-net flag (reusePort is unstable in Deno 2.9): use deno task start, or add --unstable-net to deno run\n",
    );
    const embedded = await run("deno.json", "examples/donations/main.ts");
    assert.equal(embedded.code, 2, embedded.stderr);
    assert.match(
      embedded.stderr,
      /: --workers applies to keygate's own server: an application that adds its own routes serves with one worker \(see --help\)\n$/,
    );
    // Refused before anything was opened.
    assert.equal(await Deno.stat(db.path).then(() => true, () => false), false);
  } finally {
    db.cleanup();
  }
});

// Exact through the process's shared grant counter, not by notification: with `--store-listen
// off` only the 500 ms poll would otherwise tell the sibling worker, and every request below
// comes well within it.
for (const listen of ["on", "off"]) {
  Deno.test({
    name:
      `[pg e2e] --workers 2 on PostgreSQL (--store-listen ${listen}): a token revoked through one worker is refused by every worker`,
    ignore: POSTGRES_SKIP !== false,
    sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
    async fn() {
      const url = await (await sharedPostgres()).createDatabase("workers");
      const apiKey = await addUserWithKey(url, "ops@example.org", PASSWORD);
      const server = await startServerProcess(url, [
        "--workers",
        "2",
        "--behind-proxy",
        "on",
        "--store-listen",
        listen,
      ]);
      try {
        const proxied = { "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.7" };
        const login = await fetchFresh(undefined, `${server.origin}/api/userservice/tokens`, {
          method: "POST",
          headers: { ...proxied, "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify({
            auth_request: {
              user: { email: "ops@example.org", password: PASSWORD },
              api_key: apiKey,
            },
          }),
        });
        assert.equal(login.status, 200, login.body);
        const token = JSON.parse(login.body).auth_response.access_token;
        const currentUrl = `${server.origin}${CURRENT}`;
        const headers = {
          ...proxied,
          "x-api-key": apiKey,
          authorization: `Bearer ${token}`,
          accept: "application/json",
        };
        await assertRevokedOnEveryWorker(
          undefined,
          currentUrl,
          headers,
          deleteCurrentToken(undefined, currentUrl, headers),
        );
      } finally {
        assert.equal((await server.stop()).code, 0);
      }
    },
  });
}

// The admin API is served by the main thread, whose store is not any request worker's: with
// `--store-listen off` only the process's shared grant counter can tell both workers at once.
Deno.test({
  name:
    "[pg e2e] --workers 2 on PostgreSQL (--store-listen off): a token, a user's tokens and a key revoked through the admin API are refused by every worker at once",
  ignore: POSTGRES_SKIP !== false,
  sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
  async fn() {
    const url = await (await sharedPostgres()).createDatabase("workers_admin");
    const apiKey = await addUserWithKey(url, "ops@example.org", PASSWORD);
    const created = await runAdmin(url, ["operator", "create", "ann", "--role", "write"]);
    assert.equal(created.code, 0, created.err);
    const operator = created.lastLine;
    using files = tempDbPath();
    const { cert, key } = await testCertificate();
    await Deno.writeTextFile(`${files.dir}/cert.pem`, cert);
    await Deno.writeTextFile(`${files.dir}/key.pem`, key);
    const server = await startServerProcess(url, [
      "--workers",
      "2",
      "--store-listen",
      "off",
      "--cert",
      `${files.dir}/cert.pem`,
      "--key",
      `${files.dir}/key.pem`,
      "--admin",
      "on",
      "--admin-port",
      "0",
    ]);
    try {
      /** One admin API call; returns the JSON answer after checking its status and type. */
      const admin = async (method: string, path: string, body?: unknown) => {
        const response = await fetchFresh(cert, `${server.adminOrigin}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${operator}`,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        assert.equal(response.status, 200, `${method} ${path}: ${response.body}`);
        assert.equal(response.type, "application/json; charset=utf-8");
        return JSON.parse(response.body);
      };
      const { users } = await admin("GET", "/admin/v1/users?search=ops@example.org");
      assert.equal(users.length, 1);
      const userId = users[0].id;
      const currentUrl = `${server.origin}${CURRENT}`;
      const login = async () => {
        const token = await issueToken(cert, server.origin, "ops@example.org", apiKey);
        return {
          "x-api-key": apiKey,
          authorization: `Bearer ${token}`,
          accept: "application/json",
        };
      };

      // One token, by its id.
      await assertRevokedOnEveryWorker(cert, currentUrl, await login(), async () => {
        const { tokens } = await admin("GET", `/admin/v1/users/${userId}/tokens?live=true`);
        assert.equal(tokens.length, 1);
        assert.deepEqual(await admin("POST", `/admin/v1/tokens/${tokens[0].id}/revoke`), {
          id: tokens[0].id,
          revoked: true,
        });
      });

      // Every token of the user.
      await assertRevokedOnEveryWorker(cert, currentUrl, await login(), async () => {
        assert.deepEqual(await admin("POST", `/admin/v1/users/${userId}/tokens/revoke`, {}), {
          tokens_revoked: 1,
        });
      });

      // The key, and with it its tokens.
      await assertRevokedOnEveryWorker(cert, currentUrl, await login(), async () => {
        const { keys } = await admin("GET", `/admin/v1/users/${userId}/keys`);
        assert.equal(keys.length, 1);
        const revoked = await admin("POST", `/admin/v1/keys/${keys[0].id}/revoke`);
        assert.equal(revoked.status, "revoked");
        assert.equal(revoked.tokens_revoked, 1);
      });
      const { tokens: live } = await admin("GET", `/admin/v1/users/${userId}/tokens?live=true`);
      assert.deepEqual(live, []);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  },
});
