/**
 * The nginx configuration of docs/deploy.md, for real: nginx terminates TLS
 * and forwards to keygate in proxy mode. Skipped when nginx is not installed
 * (`apt-get install -y nginx`).
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

const CURRENT = "/api/secure/userservice/tokens/current";

Deno.test({
  name: "[server] nginx from docs/deploy.md terminates TLS in front of keygate --behind-proxy",
  ignore: !hasCommand("nginx"),
  async fn() {
    const db = tempDbPath();
    let nginx: Deno.ChildProcess | undefined;
    const keygate = await startServerProcess(db.path, ["--behind-proxy", "on"]);
    try {
      const apiKey = await addUserWithKey(db.path, "n@example.org", "nginx test pw");
      const upstreamPort = new URL(keygate.origin).port;
      const { cert, certFile, keyFile } = await writeCertificate(db.dir);
      const port = findFreePort();
      const site = readDeployBlock("nginx")
        .replace("listen 443 ssl", `listen 127.0.0.1:${port} ssl`)
        .replace("server 127.0.0.1:8080;", `server 127.0.0.1:${upstreamPort};`)
        .replace("/etc/keygate/tls/fullchain.pem", certFile)
        .replace("/etc/keygate/tls/privkey.pem", keyFile);
      assert.ok(site.includes(certFile) && site.includes(String(port)));
      const dir = db.dir;
      Deno.writeTextFileSync(
        `${dir}/nginx.conf`,
        `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log warn;
events {}
http {
  access_log off;
  client_body_temp_path ${dir}/nginx-body;
  proxy_temp_path ${dir}/nginx-proxy;
  fastcgi_temp_path ${dir}/nginx-fastcgi;
  uwsgi_temp_path ${dir}/nginx-uwsgi;
  scgi_temp_path ${dir}/nginx-scgi;
${site}
}
`,
      );
      nginx = new Deno.Command("nginx", {
        args: ["-p", dir, "-c", `${dir}/nginx.conf`],
        stdout: "null",
        stderr: "piped",
      }).spawn();
      await waitForPort(port, nginx);

      const client = Deno.createHttpClient({ caCerts: [cert] });
      try {
        const origin = `https://127.0.0.1:${port}`;
        const current = await exerciseThroughProxy(origin, client, {
          email: "n@example.org",
          password: "nginx test pw",
          apiKey,
          extraHeaders: { "x-forwarded-proto": "http" },
        }, "proxy");
        assert.equal(
          current.headers.get("strict-transport-security"),
          "max-age=31536000; includeSubDomains",
        );
      } finally {
        client.close();
      }

      // Going around the proxy, without X-Forwarded-Proto, gets 403.
      const direct = await fetch(`${keygate.origin}${CURRENT}.json`);
      assert.equal(direct.status, 403);
      assert.equal(
        (await direct.json()).error_response.errors.error[0].error_code,
        "https_required",
      );
    } finally {
      nginx?.kill("SIGQUIT");
      await nginx?.output();
      assert.equal((await keygate.stop()).code, 0);
      db.cleanup();
    }
    const issuedLine = keygate.lines.map((l) => JSON.parse(l)).find((l) =>
      l.event === "token_issued"
    );
    assert.equal(issuedLine.client, "127.0.0.1", "nginx replaced the client's X-Forwarded-For");
  },
});
