/**
 * The server's lifecycle (main.ts, src/server/): a start that fails at any
 * step, and a normal stop, leave nothing open — no listener, timer, signal
 * listener or worker (Deno's test sanitizers), no open database file
 * (/proc/self/fd) — and end with the documented exit code; a second SIGTERM
 * during the final key-usage flush still lets the flush finish.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { serve } from "../../main.ts";
import { generateSelfSigned } from "../../src/platform/tls.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { addUserWithKey, startServerProcess } from "../_helpers/server_process.ts";
import { findFreePort } from "../_helpers/free_port.ts";

/**
 * Files under `dir` this process holds open (Linux; elsewhere none can be seen). Read by `ls`,
 * since Deno grants /proc/self only with --allow-all.
 */
async function openFilesUnder(dir: string): Promise<string[]> {
  if (Deno.build.os !== "linux") return [];
  const { stdout } = await new Deno.Command("ls", {
    args: ["-l", `/proc/${Deno.pid}/fd`],
    stdout: "piped",
    stderr: "null",
  }).output();
  return new TextDecoder().decode(stdout).split("\n")
    .map((line) => line.split(" -> ")[1])
    .filter((target) => target?.startsWith(dir));
}

/** Runs `serve()` in this process with a fresh SQLite file and a certificate pair on disk. */
async function serveInProcess(
  extra: (files: { cert: string; key: string; dir: string }) => string[],
): Promise<{ code: number; open: string[]; dbExists: boolean }> {
  const db = tempDbPath();
  try {
    const { cert, key } = await testCertificate();
    await Deno.writeTextFile(`${db.dir}/cert.pem`, cert);
    await Deno.writeTextFile(`${db.dir}/key.pem`, key);
    const files = { cert: `${db.dir}/cert.pem`, key: `${db.dir}/key.pem`, dir: db.dir };
    const code = await serve(
      ["--db", db.path, "--hostname", "127.0.0.1", "--log-level", "off", ...extra(files)],
      {},
      { name: "lifecycle test" },
    );
    let dbExists = true;
    try {
      Deno.statSync(db.path);
    } catch {
      dbExists = false;
    }
    return { code, open: await openFilesUnder(db.dir), dbExists };
  } finally {
    db.cleanup();
  }
}

Deno.test("serve() with a certificate that does not match its key, after the store and metrics started: exit 2, nothing left open", async () => {
  const other = await generateSelfSigned();
  const result = await serveInProcess((files) => {
    Deno.writeTextFileSync(`${files.dir}/other-key.pem`, other.key);
    return [
      "--port",
      "0",
      "--metrics",
      "--metrics-port",
      "0",
      "--cert",
      files.cert,
      "--key",
      `${files.dir}/other-key.pem`,
    ];
  });
  assert.equal(result.code, 2);
  assert.equal(result.dbExists, true, "the store was opened before the failing step");
  assert.deepEqual(result.open, []);
});

Deno.test("serve() with --metrics-port taken: exit 1, the store and the password pool closed", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (taken.addr as Deno.NetAddr).port;
    const result = await serveInProcess((files) => [
      "--port",
      "0",
      "--cert",
      files.cert,
      "--key",
      files.key,
      "--metrics",
      "--metrics-hostname",
      "127.0.0.1",
      "--metrics-port",
      String(port),
    ]);
    assert.equal(result.code, 1);
    assert.equal(result.dbExists, true);
    assert.deepEqual(result.open, []);
  } finally {
    taken.close();
  }
});

Deno.test("serve() with --admin-port taken: exit 1, the metrics listener closed too", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (taken.addr as Deno.NetAddr).port;
    const result = await serveInProcess((files) => [
      "--port",
      "0",
      "--cert",
      files.cert,
      "--key",
      files.key,
      "--metrics",
      "--metrics-port",
      "0",
      "--admin",
      "--admin-hostname",
      "127.0.0.1",
      "--admin-port",
      String(port),
    ]);
    assert.equal(result.code, 1);
    assert.deepEqual(result.open, []);
  } finally {
    taken.close();
  }
});

Deno.test("serve() with --port taken, after the admin listener and the janitor started: exit 1, nothing left open", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (taken.addr as Deno.NetAddr).port;
    for (const workers of ["1", "2"]) {
      const result = await serveInProcess((files) => [
        "--port",
        String(port),
        "--workers",
        workers,
        "--cert",
        files.cert,
        "--key",
        files.key,
        "--admin",
        "--admin-port",
        "0",
        "--metrics",
        "--metrics-port",
        "0",
      ]);
      assert.equal(result.code, 1, `--workers ${workers}`);
      assert.deepEqual(result.open, [], `--workers ${workers}`);
    }
  } finally {
    taken.close();
  }
});

Deno.test("serve() stopped by SIGTERM: resolves to 0 with the store closed and nothing left open", async () => {
  const port = findFreePort();
  const { cert } = await testCertificate();
  const client = Deno.createHttpClient({ caCerts: [cert] });
  try {
    const result = serveInProcess((files) => [
      "--port",
      String(port),
      "--cert",
      files.cert,
      "--key",
      files.key,
      "--metrics",
      "--metrics-port",
      "0",
    ]);
    let status = 0;
    for (let i = 0; i < 200 && status !== 200; i++) {
      try {
        const response = await fetch(`https://localhost:${port}/healthz`, { client });
        await response.body?.cancel();
        status = response.status;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    assert.equal(status, 200);
    Deno.kill(Deno.pid, "SIGTERM");
    const { code, open } = await result;
    assert.equal(code, 0);
    assert.deepEqual(open, []);
  } finally {
    client.close();
  }
});

Deno.test("[server] a second SIGTERM during the final key-usage flush: the flush still finishes, exit 0", async () => {
  const db = tempDbPath();
  try {
    const apiKey = await addUserWithKey(db.path, "flush@example.org", "lifecycle test pw");
    const server = await startServerProcess(db.path);
    const cert = await Deno.readTextFile(`${db.dir}/keygate-cert.pem`);
    const client = Deno.createHttpClient({ caCerts: [cert] });
    const uses = () => {
      const reader = new DatabaseSync(db.path, { readOnly: true });
      try {
        const row = reader.prepare("SELECT use_count FROM api_keys").get() as { use_count: number };
        return row.use_count;
      } finally {
        reader.close();
      }
    };
    let locker: DatabaseSync | undefined;
    try {
      const login = await fetch(`${server.origin}/api/userservice/tokens`, {
        client,
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({
          auth_request: {
            user: { email: "flush@example.org", password: "lifecycle test pw" },
            api_key: apiKey,
          },
        }),
      });
      assert.equal(login.status, 200);
      const token = (await login.json()).auth_response.access_token;
      const REQUESTS = 5;
      for (let i = 0; i < REQUESTS; i++) {
        const response = await fetch(
          `${server.origin}/api/secure/userservice/tokens/current?api_key=${apiKey}&api_token=${token}`,
          { client },
        );
        assert.equal(response.status, 200);
        await response.body?.cancel();
      }
      const before = uses();
      assert.ok(before < REQUESTS, `the uses are still to be written (${before} written)`);
      // Another connection holds the write lock: the final flush waits for it (up to 2 s).
      locker = new DatabaseSync(db.path);
      locker.exec("BEGIN IMMEDIATE");
      server.child.kill("SIGTERM");
      for (let i = 0; i < 100 && !server.lines.some((l) => l.includes("shutting down")); i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(server.lines.some((line) => line.includes("shutting down")), server.lines.join());
      await new Promise((resolve) => setTimeout(resolve, 400));
      server.child.kill("SIGTERM"); // the flush is waiting for the lock now
      await new Promise((resolve) => setTimeout(resolve, 300));
      locker.exec("COMMIT");
      const status = await server.exited();
      assert.equal(status.code, 0, server.lines.join("\n"));
      assert.ok(server.lines.at(-1)?.includes('"stopped"'), server.lines.join("\n"));
      assert.ok(!server.lines.some((line) => line.includes("key usage flush failed")));
      assert.ok(uses() >= REQUESTS, `${uses()} uses written`);
    } finally {
      locker?.close();
      client.close();
      if (server.child.pid !== undefined) {
        try {
          server.child.kill("SIGKILL");
        } catch {
          // Exited already.
        }
      }
    }
  } finally {
    db.cleanup();
  }
});
