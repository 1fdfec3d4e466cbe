/**
 * Operations, against the real server process: graceful shutdown under load,
 * the shutdown deadline, the metrics listener and proxy mode.
 */
import assert from "node:assert/strict";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";

const CURRENT = "/api/secure/userservice/tokens/current";
const EMAIL = "ops@example.org";
const PASSWORD = "operations test pw";

function authRequestBody(apiKey: string): string {
  return JSON.stringify({
    auth_request: { user: { email: EMAIL, password: PASSWORD }, api_key: apiKey },
  });
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("[server] SIGTERM under load: in-flight requests finish, none gets a 5xx, WAL checkpointed", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await addUserWithKey(db.path, EMAIL, PASSWORD);
    const server = await startServerProcess(db.path);
    const client = Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(`${db.dir}/keygate-cert.pem`)],
    });
    const tokenResponse = await fetch(`${server.origin}/api/userservice/tokens.json`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: authRequestBody(apiKey),
    });
    assert.equal(tokenResponse.status, 200);
    const token = (await tokenResponse.json()).auth_response.access_token;

    // A token request whose body is half sent when SIGTERM arrives.
    const body = authRequestBody(apiKey);
    let sendRest!: () => void;
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        const bytes = new TextEncoder().encode(body);
        controller.enqueue(bytes.subarray(0, 20));
        await new Promise<void>((resolve) => sendRest = resolve);
        controller.enqueue(bytes.subarray(20));
        controller.close();
      },
    });
    const slow = fetch(`${server.origin}/api/userservice/tokens.json`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: stream,
    });

    // Load: workers send secure requests until the server stops answering.
    const statuses: number[] = [];
    let stopped = false;
    const worker = async () => {
      while (!stopped) {
        try {
          const response = await fetch(
            `${server.origin}${CURRENT}?api_key=${apiKey}&api_token=${token}`,
            { client },
          );
          statuses.push(response.status);
          await response.body?.cancel();
        } catch {
          return; // refused: the server no longer accepts connections
        }
      }
    };
    const workers = [worker(), worker(), worker(), worker()];
    while (statuses.length < 20) await delay(10);

    server.child.kill("SIGTERM");
    await delay(300);
    sendRest();
    const finished = await slow;
    assert.equal(finished.status, 200, "the in-flight request finished");
    assert.match((await finished.json()).auth_response.access_token, /^[a-z0-9]{40}$/);
    stopped = true;
    await Promise.all(workers);
    const status = await server.exited();
    client.close();

    assert.equal(status.code, 0);
    assert.ok(statuses.length >= 20);
    assert.deepEqual(statuses.filter((s) => s !== 200), [], "every answered request got 200");
    const requests = server.lines.map((l) => JSON.parse(l)).filter((l) => l.msg === "request");
    assert.deepEqual(requests.filter((l) => l.status >= 500), []);
    assert.ok(server.lines.some((l) => l.includes('"msg":"stopped"')));
    const wal = `${db.path}-wal`;
    const walSize = (() => {
      try {
        return Deno.statSync(wal).size;
      } catch {
        return 0;
      }
    })();
    assert.equal(walSize, 0, "the WAL was checkpointed");
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] a request that outlives --shutdown-timeout does not hold the exit", async () => {
  const db = tempDbPath();
  try {
    const server = await startServerProcess(db.path, ["--shutdown-timeout", "1s"]);
    const client = Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(`${db.dir}/keygate-cert.pem`)],
    });
    const stuck = fetch(`${server.origin}/api/userservice/tokens`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"auth_request":'));
        },
      }),
    }).then((response) => response.status, () => "network error");
    await delay(300);
    const status = await server.stop();
    assert.equal(status.code, 0);
    assert.ok(
      server.lines.some((l) => l.includes("shutdown deadline passed")),
      server.lines.join("\n"),
    );
    assert.equal(await stuck, "network error", "cut off, never a 5xx");
    client.close();
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --metrics on serves Prometheus text on its own loopback listener only", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await addUserWithKey(db.path, EMAIL, PASSWORD);
    const server = await startServerProcess(db.path, ["--metrics", "on", "--metrics-port", "0"]);
    const client = Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(`${db.dir}/keygate-cert.pem`)],
    });
    try {
      assert.match(server.metricsUrl!, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const issued = await fetch(`${server.origin}/api/userservice/tokens`, {
        client,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: authRequestBody(apiKey),
      });
      assert.equal(issued.status, 200);
      await issued.body?.cancel();

      const metrics = await fetch(server.metricsUrl!);
      assert.equal(metrics.status, 200);
      assert.equal(metrics.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
      const text = await metrics.text();
      assert.match(text, /^keygate_tokens_issued_total 1$/m);
      assert.match(text, /^keygate_live_tokens 1$/m);
      assert.match(
        text,
        /^keygate_http_request_duration_seconds_count\{route="\/api\/userservice\/tokens",method="POST",status="200"\} 1$/m,
      );

      const onApiPort = await fetch(`${server.origin}/metrics`, { client });
      assert.equal(onApiPort.status, 401);
      await onApiPort.body?.cancel();
    } finally {
      client.close();
      assert.equal((await server.stop()).code, 0);
    }
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --behind-proxy serves plain HTTP and wants X-Forwarded-Proto: https", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await addUserWithKey(db.path, EMAIL, PASSWORD);
    const server = await startServerProcess(db.path, ["--behind-proxy", "on"]);
    try {
      assert.match(server.origin, /^http:\/\/127\.0\.0\.1:\d+$/);
      const post = (headers: Record<string, string>) =>
        fetch(`${server.origin}/api/userservice/tokens`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json", ...headers },
          body: authRequestBody(apiKey),
        });
      const refused = await post({});
      assert.equal(refused.status, 403);
      assert.equal(refused.headers.get("content-type"), "application/json; charset=utf-8");
      assert.equal(
        (await refused.json()).error_response.errors.error[0].error_code,
        "https_required",
      );
      const accepted = await post({
        "x-forwarded-proto": "https",
        "x-forwarded-for": "203.0.113.5",
      });
      assert.equal(accepted.status, 200);
      assert.match((await accepted.json()).auth_response.access_token, /^[a-z0-9]{40}$/);
      assert.throws(() => Deno.statSync(`${db.dir}/keygate-cert.pem`), "no certificate made");
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
    const issued = server.lines.map((l) => JSON.parse(l)).find((l) => l.event === "token_issued");
    assert.equal(issued.client, "203.0.113.5");
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --behind-proxy refuses a public address with exit code 2", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "main.ts", "--behind-proxy", "on", "--hostname", "0.0.0.0"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 2);
  assert.match(new TextDecoder().decode(output.stderr), /loopback or private address/);
});
