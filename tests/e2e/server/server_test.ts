/**
 * The real server, as a process, over real TLS: start-up, persistence across
 * a restart, graceful SIGTERM, and no plain secrets in the database file.
 */
import assert from "node:assert/strict";
import { startServerProcess } from "../../_helpers/server_process.ts";
import { main as admin } from "../../../src/cli/main.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { openSqliteStore } from "../../../src/store/sqlite/sqlite_store.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";

const hasher = createPasswordHasher();

async function runAdmin(dbPath: string, args: string[]): Promise<string> {
  const out: string[] = [];
  const code = await admin([...args, "--db", dbPath], {
    env: {},
    stdout: (text) => out.push(text),
    stderr: (text) => out.push(text),
    readPassword: () => Promise.resolve("server test pw"),
    hasher,
  });
  assert.equal(code, 0, out.join("\n"));
  return out.at(-1)!;
}

Deno.test("[server] serves HTTPS with a self-signed certificate, survives a restart, stops on SIGTERM", async () => {
  const db = tempDbPath();
  try {
    let server = await startServerProcess(db.path);
    assert.ok(server.lines.some((line) => line.includes("self-signed certificate")));
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const client = Deno.createHttpClient({ caCerts: [cert] });

    // The admin CLI works while the server runs.
    await runAdmin(db.path, ["user", "add", "ops@example.org"]);
    const apiKey = await runAdmin(db.path, ["key", "create", "ops@example.org"]);

    const getToken = async (format: "json" | "xml") => {
      const response = await fetch(`${server.origin}/api/userservice/tokens`, {
        client,
        method: "POST",
        headers: { "content-type": "application/json", accept: `application/${format}` },
        body: JSON.stringify({
          auth_request: {
            user: { email: "ops@example.org", password: "server test pw" },
            api_key: apiKey,
          },
        }),
      });
      assert.equal(response.status, 200);
      assert.equal(
        response.headers.get("strict-transport-security"),
        "max-age=31536000; includeSubDomains",
      );
      const text = await response.text();
      return format === "json"
        ? JSON.parse(text).auth_response.access_token as string
        : /<access_token>([a-z0-9]{40})<\/access_token>/.exec(text)![1];
    };
    const current = (token: string, method = "GET") =>
      fetch(
        `${server.origin}/api/secure/userservice/tokens/current?api_key=${apiKey}&api_token=${token}`,
        {
          client,
          method,
        },
      );

    const kept = await getToken("json");
    const revoked = await getToken("xml");
    assert.equal((await current(kept)).status, 200);
    const deleted = await current(revoked, "DELETE");
    assert.equal(deleted.status, 204);
    await deleted.body?.cancel();

    let status = await server.stop();
    assert.equal(status.code, 0);
    assert.ok(server.lines.some((line) => line.includes('"msg":"stopped"')));

    server = await startServerProcess(db.path);
    assert.equal(
      await Deno.readTextFile(`${db.dir}/keygate-cert.pem`),
      cert,
      "certificate is reused",
    );
    const stillGood = await current(kept);
    assert.equal(stillGood.status, 200);
    assert.match(await stillGood.text(), /<email>ops@example.org<\/email>/);
    const stillRevoked = await current(revoked);
    assert.equal(stillRevoked.status, 401);
    assert.match(await stillRevoked.text(), /<error_code>invalid_token<\/error_code>/);

    status = await server.stop();
    assert.equal(status.code, 0);
    client.close();

    // Neither the database nor its WAL holds a secret in plain form.
    for (const file of Deno.readDirSync(db.dir)) {
      if (!file.name.startsWith("keygate.sqlite3")) continue;
      const bytes = new TextDecoder("latin1").decode(Deno.readFileSync(`${db.dir}/${file.name}`));
      for (const secret of ["server test pw", apiKey, kept, revoked]) {
        assert.ok(!bytes.includes(secret), `${file.name} holds a secret`);
      }
    }
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] refuses a bad flag with exit code 2 and one line", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "main.ts", "--port", "nope"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 2);
  assert.equal(
    new TextDecoder().decode(output.stderr),
    'keygate: Invalid --port "nope": expected a whole number from 0 to 65535 (see --help)\n',
  );
});

Deno.test("[server] --help lists every option", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "main.ts", "--help"],
    stdout: "piped",
  }).output();
  assert.equal(output.code, 0);
  const help = new TextDecoder().decode(output.stdout);
  for (
    const flag of [
      "--port",
      "--hostname",
      "--db",
      "--cert",
      "--key",
      "--default-timeout",
      "--cors-origins",
      "--log-level",
    ]
  ) {
    assert.ok(help.includes(flag), flag);
  }
});

Deno.test({
  name: "[server] turns Nagle's algorithm off on its TLS listener (Linux)",
  ignore: Deno.build.os !== "linux",
}, async () => {
  const db = tempDbPath();
  try {
    const server = await startServerProcess(db.path);
    const listening = server.lines.map((line) => JSON.parse(line))
      .find((entry) => entry.msg.startsWith("keygate listening on"));
    assert.equal(listening?.tcp_nodelay, true);
    assert.ok(!server.lines.some((line) => line.includes("Nagle")), "no warning");
    assert.equal((await server.stop()).code, 0);
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --limit-lease-ahead: listed by --help, refused when not on or off, logged when off", async () => {
  const run = (args: string[]) =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", "main.ts", ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
  const help = new TextDecoder().decode((await run(["--help"])).stdout);
  for (const text of ["--limit-lease-ahead", "KEYGATE_LIMIT_LEASE_AHEAD"]) {
    assert.ok(help.includes(text), text);
  }
  const bad = await run(["--limit-lease-ahead=later"]);
  assert.equal(bad.code, 2);
  assert.equal(
    new TextDecoder().decode(bad.stderr),
    'keygate: Invalid --limit-lease-ahead "later": expected on, off, true, false, 1 or 0 ' +
      "(see --help)\n",
  );
  const db = tempDbPath();
  try {
    for (
      const [args, logged] of [[[], undefined], [["--limit-lease-ahead", "off"], false]] as const
    ) {
      const server = await startServerProcess(db.path, [...args]);
      const listening = server.lines.map((line) => JSON.parse(line))
        .find((entry) => entry.msg.startsWith("keygate listening on"));
      assert.ok(listening !== undefined);
      assert.equal(listening.limit_lease_ahead, logged, args.join(" "));
      assert.equal((await server.stop()).code, 0);
    }
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] writes the keys' last use to the database when it stops", async () => {
  const db = tempDbPath();
  try {
    const server = await startServerProcess(db.path);
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const client = Deno.createHttpClient({ caCerts: [cert] });
    await runAdmin(db.path, ["user", "add", "ops@example.org"]);
    const apiKey = await runAdmin(db.path, ["key", "create", "ops@example.org"]);
    const issued = await fetch(`${server.origin}/api/userservice/tokens.json`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        auth_request: {
          user: { email: "ops@example.org", password: "server test pw" },
          api_key: apiKey,
        },
      }),
    });
    assert.equal(issued.status, 200);
    const token = (await issued.json()).auth_response.access_token;
    for (let i = 0; i < 2; i++) {
      const response = await fetch(
        `${server.origin}/api/secure/userservice/tokens/current?api_key=${apiKey}&api_token=${token}`,
        { client },
      );
      assert.equal(response.status, 200);
      await response.body?.cancel();
    }
    assert.equal((await server.stop()).code, 0);
    client.close();
    const store = openSqliteStore(db.path);
    const key = (await store.listApiKeys())[0];
    await store.closeStore();
    assert.deepEqual([key.useCount, key.lastUsedFrom], [3, "127.0.0.1"]);
    assert.ok(key.lastUsedAt !== null && key.lastUsedAt >= key.createdAt);
  } finally {
    db.cleanup();
  }
});
Deno.test("[server] --upstream: the real process forwards an authenticated request", async () => {
  const db = tempDbPath();
  const seen: { path: string; user: string | null; auth: string | null }[] = [];
  const backend = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const url = new URL(request.url);
    seen.push({
      path: url.pathname + url.search,
      user: request.headers.get("x-keygate-email"),
      auth: request.headers.get("authorization"),
    });
    return new Response("from the backend", { headers: { "x-backend": "1" } });
  });
  try {
    await runAdmin(db.path, ["user", "add", "ops@example.org"]);
    const apiKey = await runAdmin(db.path, ["key", "create", "ops@example.org"]);
    const server = await startServerProcess(db.path, [
      "--upstream",
      `http://127.0.0.1:${backend.addr.port}`,
      "--upstream-timeout",
      "5s",
    ]);
    assert.ok(server.lines.some((line) => line.includes("forwarding authenticated requests")));
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const client = Deno.createHttpClient({ caCerts: [cert] });
    try {
      const tokenResponse = await fetch(`${server.origin}/api/userservice/tokens`, {
        client,
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({
          auth_request: {
            user: { email: "ops@example.org", password: "server test pw" },
            api_key: apiKey,
          },
        }),
      });
      const token = (await tokenResponse.json()).auth_response.access_token;
      const response = await fetch(`${server.origin}/api/secure/reports?year=2026`, {
        client,
        headers: { "x-api-key": apiKey, authorization: `Bearer ${token}` },
      });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("x-backend"), "1");
      assert.equal(await response.text(), "from the backend");
      assert.deepEqual(seen, [{
        path: "/api/secure/reports?year=2026",
        user: "ops@example.org",
        auth: null,
      }]);
    } finally {
      client.close();
      assert.equal((await server.stop()).code, 0);
    }
  } finally {
    await backend.shutdown();
    db.cleanup();
  }
});

Deno.test("[server] --help lists the upstream options", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "main.ts", "--help"],
    stdout: "piped",
  }).output();
  const help = new TextDecoder().decode(output.stdout);
  for (
    const text of ["--upstream ", "KEYGATE_UPSTREAM", "--upstream-timeout", "--hide-credentials"]
  ) {
    assert.ok(help.includes(text), text);
  }
});

Deno.test("[server] a JSON5 body with U+2028 in a string: stdout and stderr hold only JSON log lines", async () => {
  const db = tempDbPath();
  try {
    const server = await startServerProcess(db.path);
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const client = Deno.createHttpClient({ caCerts: [cert] });
    try {
      // Single quotes make it JSON5; the separators sit in a value and in a key.
      const bodies = [
        "{auth_request: {user: {email: 'a@example.org', password: 'x\u2028y\u2029'}, api_key: 'k'}}",
        "{'auth_request\u2028': {}}",
      ];
      for (const body of bodies) {
        const response = await fetch(`${server.origin}/api/userservice/tokens`, {
          client,
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body,
        });
        await response.body?.cancel();
        assert.ok(response.status === 400 || response.status === 401, String(response.status));
      }
    } finally {
      client.close();
      await server.stop();
    }
    assert.deepEqual(server.errors, [], "nothing on standard error");
    for (const line of server.lines) {
      assert.doesNotThrow(() => JSON.parse(line), `not a JSON log line: ${line}`);
    }
  } finally {
    db.cleanup();
  }
});
