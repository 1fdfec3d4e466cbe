/**
 * Certificate reload without a restart, on the real server as a process: SIGHUP and a changed
 * --cert/--key swap the pair of the API listener (main thread or every worker) and the admin
 * one under keep-alive load, with no failed request or handshake; a mismatched, half-written
 * or garbage pair is refused with one log line and changes nothing.
 */
import assert from "node:assert/strict";
import { TEST_STORE_NAME } from "../../_helpers/store.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { POSTGRES_SKIP, sharedPostgres } from "../../_helpers/postgres_cluster.ts";
import { type ServerProcess, startServerProcess } from "../../_helpers/server_process.ts";
import { makePairs, type Pair, servedPair, startKeepAliveLoad } from "../../_helpers/tls_load.ts";
import { waitFor } from "../../_helpers/wait_for.ts";

const SWAPS = 10;

function portOf(origin: string): number {
  return Number(new URL(origin).port);
}

async function writePair(dir: string, pair: Pair): Promise<void> {
  // As certbot and acme.sh do: the new files land whole (a rename), key and certificate.
  await Deno.writeTextFile(`${dir}/key.pem.new`, pair.key);
  await Deno.rename(`${dir}/key.pem.new`, `${dir}/key.pem`);
  await Deno.writeTextFile(`${dir}/cert.pem.new`, pair.cert);
  await Deno.rename(`${dir}/cert.pem.new`, `${dir}/cert.pem`);
}

function count(server: ServerProcess, pattern: RegExp): number {
  return server.lines.filter((line) => pattern.test(line)).length;
}

async function readMetric(server: ServerProcess, name: string): Promise<string[]> {
  const text = await (await fetch(server.metricsUrl!)).text();
  return text.split("\n").filter((line) => line.startsWith(name));
}

/** The server on --cert/--key files in `dir`; `postgres`: on a PostgreSQL database. */
async function startWithPair(
  dir: string,
  pair: Pair,
  extra: string[],
  postgres = false,
): Promise<ServerProcess> {
  await writePair(dir, pair);
  const store = postgres
    ? await (await sharedPostgres()).createDatabase("cert_reload")
    : `${dir}/keygate.sqlite3`;
  return await startServerProcess(store, [
    "--cert",
    `${dir}/cert.pem`,
    "--key",
    `${dir}/key.pem`,
    ...extra,
  ]);
}

const POSTGRES = TEST_STORE_NAME === "postgres";

for (const workers of [1, 2]) {
  Deno.test({
    name: `[${
      POSTGRES ? "pg e2e" : "server"
    }] --workers ${workers}: SIGHUP swaps the API's and the admin listener's certificate under keep-alive load, no request or handshake failing`,
    ignore: POSTGRES && POSTGRES_SKIP !== false,
    sanitizeResources: false, // the server's pipes close after its exit, at the end of the test
    async fn() {
      using db = tempDbPath();
      const dir = db.dir;
      const pairs = await makePairs(SWAPS + 1);
      const server = await startWithPair(dir, pairs[0], [
        "--workers",
        String(workers),
        "--admin",
        "--admin-port",
        "0",
        "--metrics",
        "--metrics-port",
        "0",
        "--cert-reload-interval",
        "0",
        "--log-level",
        "info",
      ], POSTGRES);
      try {
        const apiPort = portOf(server.origin);
        const adminPort = portOf(server.adminOrigin!);
        assert.equal(await servedPair(apiPort, pairs), 0);
        const api = startKeepAliveLoad(apiPort, pairs, { connections: 20, path: "/healthz" });
        const admin = startKeepAliveLoad(adminPort, pairs, { connections: 4, path: "/healthz" });
        for (let swap = 1; swap <= SWAPS; swap++) {
          await writePair(dir, pairs[swap]);
          server.child.kill("SIGHUP");
          await waitFor(`reload ${swap}`, () => count(server, /"certificate reloaded"/) === swap);
          // Every new connection from now on gets the new certificate, on both listeners.
          assert.equal(await servedPair(apiPort, pairs), swap, `API after swap ${swap}`);
          assert.equal(await servedPair(adminPort, pairs), swap, `admin after swap ${swap}`);
          await new Promise((resolve) => setTimeout(resolve, 100)); // load on the new listener
        }
        const [apiLoad, adminLoad] = [await api.stop(), await admin.stop()];
        for (const [name, load] of [["API", apiLoad], ["admin", adminLoad]] as const) {
          assert.equal(load.failed, 0, `${name}: ${load.errors.slice(0, 3).join("; ")}`);
          assert.equal(load.failedHandshakes, 0, `${name}: ${load.errors.slice(0, 3).join("; ")}`);
          assert.ok(load.ok > SWAPS * 10, `${name}: ${load.ok} answers`);
          // Old connections were told to reconnect rather than cut.
          assert.ok(load.reconnects > 0, `${name}: no Connection: close seen`);
        }
        const expiry = await readMetric(server, "keygate_tls_certificate_expiry_timestamp_seconds");
        const expected = new Date(Date.now() + (30 + SWAPS) * 86_400_000).getTime() / 1000;
        for (const listener of ["api", "admin"]) {
          const line = expiry.find((line) => line.includes(`listener="${listener}"`));
          assert.ok(line !== undefined, expiry.join("\n"));
          assert.ok(Math.abs(Number(line.split(" ").at(-1)) - expected) < 600, line);
        }
        assert.deepEqual(
          await readMetric(server, 'keygate_tls_certificate_reloads_total{outcome="reloaded"}'),
          [`keygate_tls_certificate_reloads_total{outcome="reloaded"} ${SWAPS}`],
        );

        // A key that does not belong to the certificate: refused, one line, nothing changes.
        await writePair(dir, { cert: pairs[1].cert, key: pairs[2].key });
        server.child.kill("SIGHUP");
        await waitFor("the refusal", () => count(server, /certificate reload refused/) === 1);
        assert.match(
          server.lines.find((line) => /certificate reload refused/.test(line))!,
          /"level":"warn".*--key .*key\.pem\\" does not match the certificate in --cert/,
        );
        assert.equal(await servedPair(apiPort, pairs), SWAPS);
        assert.equal(await servedPair(adminPort, pairs), SWAPS);
        assert.deepEqual(
          await readMetric(server, "keygate_tls_certificate_expiry_timestamp_seconds"),
          expiry,
        );
        assert.deepEqual(
          await readMetric(server, 'keygate_tls_certificate_reloads_total{outcome="reloaded"}'),
          [`keygate_tls_certificate_reloads_total{outcome="reloaded"} ${SWAPS}`],
        );
        assert.equal(count(server, /"certificate reloaded"/), SWAPS);
      } finally {
        const status = await server.stop();
        assert.equal(status.code, 0, server.errors.join("\n"));
      }
    },
  });
}

Deno.test({
  name:
    "[server] --cert-reload-interval: a changed pair is served without a signal; a half-written or garbage one is refused once and the old pair kept",
  sanitizeResources: false,
  async fn() {
    using db = tempDbPath();
    const dir = db.dir;
    const pairs = await makePairs(3);
    const server = await startWithPair(dir, pairs[0], [
      "--cert-reload-interval",
      "1s",
      "--log-level",
      "info",
    ]);
    try {
      const port = portOf(server.origin);
      // Half-written: the certificate cut short, as a reader sees a file being copied in place.
      await Deno.writeTextFile(`${dir}/cert.pem`, pairs[1].cert.slice(0, 200));
      await Deno.writeTextFile(`${dir}/key.pem`, pairs[1].key);
      await waitFor("the refusal", () => count(server, /certificate reload refused/) === 1);
      assert.match(
        server.lines.find((line) => /certificate reload refused/.test(line))!,
        /cert\.pem\\" is incomplete: a PEM block has no END line/,
      );
      await new Promise((resolve) => setTimeout(resolve, 2500)); // two more intervals
      assert.equal(count(server, /certificate reload refused/), 1, "the same files logged again");
      assert.equal(await servedPair(port, pairs), 0);

      // The copy completes: served within an interval or two, without a signal.
      await Deno.writeTextFile(`${dir}/cert.pem`, pairs[1].cert);
      await waitFor("the new pair", () => count(server, /certificate reloaded/) === 1, 5000);
      assert.equal(await servedPair(port, pairs), 1);

      // Garbage in both files.
      await Deno.writeTextFile(`${dir}/cert.pem`, "not a certificate\n");
      await waitFor("the refusal", () => count(server, /certificate reload refused/) === 2);
      assert.match(server.lines.at(-1)!, /holds no PEM CERTIFICATE/);
      assert.equal(await servedPair(port, pairs), 1);
    } finally {
      const status = await server.stop();
      assert.equal(status.code, 0, server.errors.join("\n"));
    }
  },
});

Deno.test({
  name:
    "[server] SIGHUP with the self-signed certificate reloads nothing, says so, and keeps serving",
  sanitizeResources: false,
  async fn() {
    using db = tempDbPath();
    const server = await startServerProcess(db.path, ["--log-level", "info"]);
    try {
      const port = portOf(server.origin);
      const cert = await Deno.readTextFile(db.path.replace(/[^/]*$/, "keygate-cert.pem"));
      server.child.kill("SIGHUP");
      await waitFor("the line", () => count(server, /SIGHUP: nothing to reload/) === 1);
      assert.equal(await servedPair(port, [{ cert, key: "" }]), 0);
    } finally {
      const status = await server.stop();
      assert.equal(status.code, 0, server.errors.join("\n"));
    }
  },
});

Deno.test({
  name:
    "[server] a second keygate on the port is refused at start-up, though the listener binds with reusePort for reloads",
  sanitizeResources: false,
  async fn() {
    using db = tempDbPath();
    const server = await startServerProcess(db.path, ["--admin", "--admin-port", "0"]);
    try {
      for (
        const [flag, origin] of [["--port", server.origin], ["--admin-port", server.adminOrigin!]]
      ) {
        const port = portOf(origin);
        const second = await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "--allow-all",
            "main.ts",
            "--hostname",
            "127.0.0.1",
            "--db",
            `${db.dir}/second.sqlite3`,
            ...(flag === "--port" ? ["--port", String(port)] : ["--port", "0", "--admin"]),
            ...(flag === "--admin-port" ? ["--admin-port", String(port)] : []),
          ],
          stdout: "null",
          stderr: "piped",
          signal: AbortSignal.timeout(15_000), // one that starts serving is killed, and fails
        }).output();
        assert.equal(second.code, 1);
        assert.match(
          new TextDecoder().decode(second.stderr),
          new RegExp(`Cannot listen on 127\\.0\\.0\\.1:${port} \\(${flag} ${port}\\): .*in use`),
        );
      }
    } finally {
      const status = await server.stop();
      assert.equal(status.code, 0, server.errors.join("\n"));
    }
  },
});
