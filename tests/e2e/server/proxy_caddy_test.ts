/**
 * The Caddy configuration of docs/deploy.md, for real: Caddy terminates TLS
 * and forwards to keygate in proxy mode. Skipped when caddy is not installed
 * (`apt-get install -y caddy`).
 */
import assert from "node:assert/strict";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import {
  exerciseThroughProxy,
  hasCommand,
  readDeployBlock,
  waitForPort,
  writeCertificate,
} from "../../_helpers/reverse_proxy.ts";
import { findFreePort } from "../../_helpers/free_port.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";

Deno.test({
  name: "[server] Caddy from docs/deploy.md terminates TLS in front of keygate --behind-proxy",
  ignore: !hasCommand("caddy"),
  async fn() {
    const db = tempDbPath();
    let caddy: Deno.ChildProcess | undefined;
    const keygate = await startServerProcess(db.path, ["--behind-proxy", "on"]);
    try {
      const apiKey = await addUserWithKey(db.path, "c@example.org", "caddy test pw");
      const upstreamPort = new URL(keygate.origin).port;
      const { cert, certFile, keyFile } = await writeCertificate(db.dir);
      const port = findFreePort();
      // The test's own additions: no admin endpoint, no port 80, our certificate.
      const caddyfile = readDeployBlock("caddy")
        .replace("{\n", "{\n\tadmin off\n\tauto_https disable_redirects\n")
        .replace(
          "api.example.org {\n",
          `https://127.0.0.1:${port} {\n\ttls ${certFile} ${keyFile}\n`,
        )
        .replace("reverse_proxy 127.0.0.1:8080", `reverse_proxy 127.0.0.1:${upstreamPort}`);
      assert.ok(caddyfile.includes(String(port)) && caddyfile.includes(certFile));
      Deno.writeTextFileSync(`${db.dir}/Caddyfile`, caddyfile);
      caddy = new Deno.Command("caddy", {
        args: ["run", "--config", `${db.dir}/Caddyfile`, "--adapter", "caddyfile"],
        env: { XDG_DATA_HOME: db.dir, XDG_CONFIG_HOME: db.dir, HOME: db.dir },
        stdout: "null",
        stderr: "piped",
      }).spawn();
      await waitForPort(port, caddy);

      const client = Deno.createHttpClient({ caCerts: [cert] });
      try {
        const origin = `https://127.0.0.1:${port}`;
        await exerciseThroughProxy(origin, client, {
          email: "c@example.org",
          password: "caddy test pw",
          apiKey,
        }, "keygate");
      } finally {
        client.close();
      }
    } finally {
      caddy?.kill("SIGTERM");
      await caddy?.output();
      assert.equal((await keygate.stop()).code, 0);
      db.cleanup();
    }
    const issuedLine = keygate.lines.map((l) => JSON.parse(l)).find((l) =>
      l.event === "token_issued"
    );
    assert.equal(issuedLine.client, "127.0.0.1", "Caddy replaced the client's X-Forwarded-For");
  },
});
