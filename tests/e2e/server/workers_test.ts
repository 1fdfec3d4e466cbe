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
import { createCapturingLogger } from "../../_helpers/capturing_logger.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { testCertificate } from "../../_helpers/tls_server.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";
import {
  assertRevokedOnEveryWorker,
  CURRENT,
  deleteCurrentToken,
  fetchFresh,
  issueToken,
  PASSWORD,
} from "../../_helpers/worker_requests.ts";

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

Deno.test("[server] deno task start --issuer: every worker's OAuth metadata names that origin, not the Host", async () => {
  const db = tempDbPath();
  try {
    await addUserWithKey(db.path, "ops@example.org", PASSWORD);
    const server = await startServerProcess(
      db.path,
      ["--workers", "2", "--issuer", "https://keys.example.org"],
      { task: true },
    );
    try {
      const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
      // Fresh connections land on either worker; each must answer with the configured issuer.
      for (let i = 0; i < 6; i++) {
        const response = await fetchFresh(
          cert,
          `${server.origin}/.well-known/oauth-authorization-server`,
        );
        assert.equal(response.status, 200);
        assert.equal(response.type, "application/json; charset=utf-8");
        const body = JSON.parse(response.body);
        assert.equal(body.issuer, "https://keys.example.org");
        assert.equal(
          body.revocation_endpoint,
          "https://keys.example.org/api/userservice/tokens/revoke",
        );
      }
    } finally {
      const status = await server.stop();
      assert.equal(status.code, 0);
    }
  } finally {
    db.cleanup();
  }
});
