/**
 * The server's first-start mistakes, as an operator meets them: each ends in
 * one line on standard error naming the flag, the value and what to do, with
 * exit code 2 (fix the setting) or 1 (fix the environment), and no stack trace.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { VERSION } from "../../../src/config/version.ts";
import { generateSelfSigned } from "../../../src/platform/tls.ts";
import { describeSkippedEmails } from "../../../src/store/canonical_emails.ts";
import { writePreNfcDatabase } from "../../_helpers/pre_nfc_db.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { assertOneLine, PERMISSIONS, start } from "../../_helpers/server_start.ts";

Deno.test("[server] a port in use: one line naming --port, exit 1", async () => {
  const db = tempDbPath();
  const blocker = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (blocker.addr as Deno.NetAddr).port;
    const result = await start(["--db", db.path, "--port", String(port)]);
    assert.equal(result.code, 1);
    assertOneLine(
      result.err,
      `keygate: Cannot listen on 127.0.0.1:${port} (--port ${port}): the address is already ` +
        "in use; stop the other process or choose another --port",
    );
  } finally {
    blocker.close();
    db.cleanup();
  }
});

Deno.test("[server] a missing --cert file: one line naming the flag and file, exit 2", async () => {
  const db = tempDbPath();
  try {
    const cert = `${db.dir}/nope.pem`;
    const result = await start(["--db", db.path, "--cert", cert, "--key", cert]);
    assert.equal(result.code, 2);
    assertOneLine(
      result.err,
      `keygate: Cannot read --cert "${cert}": no such file or directory; ` +
        "give the path of a PEM file (certificate chain)",
    );
    assert.equal(existsSync(db.path), false, "no database was created");
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] swapped, garbage and mismatched PEM files: one line each, exit 2", async () => {
  const db = tempDbPath();
  try {
    const pair = await generateSelfSigned();
    const other = await generateSelfSigned();
    const write = (name: string, text: string) => {
      Deno.writeTextFileSync(`${db.dir}/${name}`, text);
      return `${db.dir}/${name}`;
    };
    const cert = write("cert.pem", pair.cert);
    const key = write("key.pem", pair.key);
    const garbage = write("garbage.pem", "hello\n");
    const otherKey = write("other-key.pem", other.key);
    const cases: [string[], string][] = [
      [
        ["--cert", key, "--key", cert],
        `keygate: Invalid --cert "${key}" and --key "${cert}": they are swapped; ` +
        "--cert takes the certificate chain, --key the private key",
      ],
      [
        ["--cert", garbage, "--key", key],
        `keygate: Invalid --cert "${garbage}": no PEM certificate in it ` +
        '(expected "-----BEGIN CERTIFICATE-----")',
      ],
      [
        ["--cert", cert, "--key", garbage],
        `keygate: Invalid --key "${garbage}": no PEM private key in it ` +
        '(expected "-----BEGIN PRIVATE KEY-----")',
      ],
      [
        ["--cert", cert, "--key", otherKey],
        `keygate: Invalid --cert "${cert}" or --key "${otherKey}": the key does not belong ` +
        "to the certificate; give a matching PEM certificate chain and private key",
      ],
    ];
    for (const [args, message] of cases) {
      const result = await start(["--db", db.path, "--port", "0", ...args]);
      assert.equal(result.code, 2, args.join(" "));
      assertOneLine(result.err, message);
    }
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] a directory or an unwritable path as --db: one line, nothing created", async () => {
  const db = tempDbPath();
  try {
    const directory = await start(["--db", db.dir, "--port", "0"]);
    assert.equal(directory.code, 2);
    assertOneLine(
      directory.err,
      `keygate: Invalid --db "${db.dir}": it is a directory; give a file path such as ` +
        `${db.dir}/keygate.sqlite3`,
    );
    assert.deepEqual([...Deno.readDirSync(db.dir)], [], "nothing written into it");

    // Under a regular file no directory can be made, whoever runs the test (even root).
    Deno.writeTextFileSync(`${db.dir}/file`, "");
    const blocked = `${db.dir}/file/sub/keygate.sqlite3`;
    const unwritable = await start(["--db", blocked, "--port", "0"]);
    assert.equal(unwritable.code, 1);
    assertOneLine(
      unwritable.err,
      `keygate: Cannot create the directory of --db "${blocked}": a part of the path is not a ` +
        "directory; choose a writable path or fix the permissions",
    );

    Deno.writeTextFileSync(`${db.dir}/not-a-db.sqlite3`, "just text, not SQLite ".repeat(50));
    const garbage = await start(["--db", `${db.dir}/not-a-db.sqlite3`, "--port", "0"]);
    assert.equal(garbage.code, 1);
    assertOneLine(
      garbage.err,
      /^keygate: Cannot open --db ".*not-a-db\.sqlite3": .*; it is not a keygate database; check the path$/,
    );
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] -h and --help print the help, --version the version, exit 0", async () => {
  for (const flag of ["-h", "--help"]) {
    const result = await start([flag]);
    assert.equal(result.code, 0);
    assert.match(result.out, /^keygate: API-key and access-token authentication over HTTPS\n/);
    assert.equal(result.err, "");
  }
  const version = await start(["--version"]);
  assert.equal(version.code, 0);
  assert.equal(version.out, `keygate ${VERSION}\n`);
});

Deno.test("[server] bare boolean flags mean on; a bad KEYGATE_* value names the variable", async () => {
  const bad = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...PERMISSIONS, "main.ts", "--port", "0"],
    env: { KEYGATE_METRICS: "yes" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(bad.code, 2);
  assert.equal(
    new TextDecoder().decode(bad.stderr),
    'keygate: Invalid KEYGATE_METRICS "yes": expected on, off, true, false, 1 or 0 ' +
      "(see --help)\n",
  );
  const db = tempDbPath();
  try {
    const server = await startServerProcess(db.path, ["--metrics", "--metrics-port", "0"]);
    assert.ok(server.metricsUrl, "a bare --metrics turned metrics on");
    const response = await fetch(server.metricsUrl);
    assert.equal(response.status, 200);
    await response.body?.cancel();
    assert.equal((await server.stop()).code, 0);
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] `deno task start -- --port 0` starts (the npm habit of a leading --)", async () => {
  const db = tempDbPath();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "start", "--", "--port", "0", "--hostname", "127.0.0.1", "--db", db.path],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    while (!/keygate listening on https:\/\/127\.0\.0\.1:\d+\//.test(seen)) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
    }
    assert.match(seen, /keygate listening on https:\/\/127\.0\.0\.1:\d+\//);
    const port = Number(/listening on https:\/\/127\.0\.0\.1:(\d+)\//.exec(seen)![1]);
    assert.notEqual(port, 8443, "a free port was picked");
    await reader.cancel();
  } finally {
    child.kill("SIGTERM");
    await child.status;
    db.cleanup();
  }
});

Deno.test("[server] a login writes only JSON lines to the log (no Deno request.signal warning)", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await addUserWithKey(db.path, "log@example.org", "log test pw");
    const server = await startServerProcess(db.path);
    const client = Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(`${db.dir}/keygate-cert.pem`)],
    });
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${server.origin}/api/userservice/tokens.json`, {
        client,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          auth_request: {
            user: { email: "log@example.org", password: "log test pw" },
            api_key: apiKey,
          },
        }),
      });
      assert.equal(response.status, 200);
      await response.body?.cancel();
    }
    client.close();
    assert.equal((await server.stop()).code, 0);
    assert.ok(server.lines.length > 2);
    for (const line of server.lines) assert.doesNotThrow(() => JSON.parse(line), line);
    assert.deepEqual(server.errors, [], "nothing on standard error either");
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --pid-file holds the process id while serving and is removed on exit", async () => {
  const db = tempDbPath();
  try {
    const pidFile = `${db.dir}/run/keygate.pid`;
    const server = await startServerProcess(db.path, ["--pid-file", pidFile]);
    assert.equal(Deno.readTextFileSync(pidFile), `${server.child.pid}\n`);
    Deno.kill(Number(Deno.readTextFileSync(pidFile)), "SIGTERM");
    assert.equal((await server.exited()).code, 0);
    assert.equal(existsSync(pidFile), false);

    Deno.writeTextFileSync(`${db.dir}/file`, "");
    const blocked = `${db.dir}/file/keygate.pid`;
    const refused = await start(["--db", db.path, "--port", "0", "--pid-file", blocked]);
    assert.equal(refused.code, 1);
    assertOneLine(
      refused.err,
      `keygate: Cannot write --pid-file "${blocked}": a part of the path is not a directory; ` +
        "choose a writable path or fix the permissions",
    );
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] the e-mail migration's warning is one log line with a count and no address", async () => {
  const db = tempDbPath();
  try {
    writePreNfcDatabase(db.path);
    const server = await startServerProcess(db.path);
    assert.equal((await server.stop()).code, 0);
    const warnings = server.lines.map((line) => JSON.parse(line))
      .filter((entry) => entry.event === "store_migration");
    assert.deepEqual(
      warnings.map((entry) => [entry.level, entry.msg]),
      [["warn", describeSkippedEmails(1)]],
    );
    assert.ok(!server.lines.some((line) => /@b\.org/.test(line)), "no address is logged");
    assert.deepEqual(server.errors, []);
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --audit-retention under 30 days: one line, exit 2; 365d starts", async () => {
  const bad = await start(["--port", "0", "--audit-retention", "30m"]);
  assert.equal(bad.code, 2);
  assertOneLine(
    bad.err,
    'keygate: Invalid --audit-retention "30m": expected off or a duration of 30d or more, ' +
      'like "365d" (see --help)',
  );
  const db = tempDbPath();
  try {
    const server = await startServerProcess(db.path, ["--audit-retention", "365d"]);
    assert.equal((await server.stop()).code, 0);
  } finally {
    db.cleanup();
  }
});

Deno.test("[server] --store-staleness over 5m: one line, exit 2 (failing closed stays on)", async () => {
  const db = tempDbPath();
  try {
    // Killed after 20 s: a server that accepted the value would otherwise run on.
    const signal = AbortSignal.timeout(20_000);
    for (const value of ["10000000d", "301s", "6m"]) {
      const result = await start(["--db", db.path, "--store-staleness", value], signal);
      assert.equal(result.code, 2, value);
      assertOneLine(
        result.err,
        `keygate: Invalid --store-staleness "${value}": expected 5m or less: longer, revoked ` +
          "tokens would keep working on an instance that hears nothing from PostgreSQL (see --help)",
      );
    }
    const env = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...PERMISSIONS, "main.ts", "--hostname", "127.0.0.1", "--db", db.path],
      env: { KEYGATE_STORE_STALENESS: "2h" },
      stdout: "null",
      stderr: "piped",
      signal,
    }).output();
    assert.equal(env.code, 2);
    assert.match(
      new TextDecoder().decode(env.stderr),
      /^keygate: Invalid KEYGATE_STORE_STALENESS "2h"/,
    );
    assert.equal(existsSync(db.path), false, "no database was created");
  } finally {
    db.cleanup();
  }
});
