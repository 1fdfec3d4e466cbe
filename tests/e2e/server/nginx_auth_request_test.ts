/**
 * nginx `auth_request` in front of a backend, asking keygate's forward-auth
 * endpoint: the configuration is the one docs/deploy.md shows. Skipped when
 * nginx (with its auth_request module, as Debian's nginx and nginx-light
 * have) is not installed: `apt-get install -y nginx-light`.
 */
import assert from "node:assert/strict";
import { issueToken } from "../../_helpers/requests.ts";
import { createTestApp } from "../../_helpers/test_app.ts";
import { startTlsServer, testCertificate } from "../../_helpers/tls_server.ts";

function findNginx(): string | undefined {
  for (const candidate of ["nginx", "/usr/sbin/nginx", "/usr/local/sbin/nginx"]) {
    try {
      const { success, stderr } = new Deno.Command(candidate, { args: ["-V"], stdout: "null" })
        .outputSync();
      if (success && new TextDecoder().decode(stderr).includes("http_auth_request_module")) {
        return candidate;
      }
    } catch {
      // not there
    }
  }
  return undefined;
}

const NGINX = findNginx();

/** The docs/deploy.md configuration, with test paths and ports filled in. */
function nginxConfig(dir: string, keygate: string, backend: string): string {
  const user = Deno.uid() === 0 ? "user root;" : "";
  return `
${user}
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;

  server {
    listen unix:${dir}/nginx.sock;

    # --- from docs/deploy.md -------------------------------------------
    location = /_keygate/verify {
      internal;
      proxy_pass ${keygate}/api/userservice/verify;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Original-Method $request_method;
      proxy_ssl_server_name on;
      proxy_ssl_name localhost;
      proxy_ssl_verify on;
      proxy_ssl_trusted_certificate ${dir}/keygate-ca.pem;
    }

    location = /_keygate/error {
      internal;
      proxy_method GET;
      proxy_pass ${keygate}/api/userservice/verify;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Original-Method $request_method;
      proxy_ssl_server_name on;
      proxy_ssl_name localhost;
      proxy_ssl_verify on;
      proxy_ssl_trusted_certificate ${dir}/keygate-ca.pem;
    }

    location /api/ {
      auth_request /_keygate/verify;
      error_page 401 403 = /_keygate/error;

      auth_request_set $keygate_user $upstream_http_x_keygate_user;
      auth_request_set $keygate_email $upstream_http_x_keygate_email;
      auth_request_set $keygate_key_id $upstream_http_x_keygate_key_id;
      proxy_set_header X-Keygate-User $keygate_user;
      proxy_set_header X-Keygate-Email $keygate_email;
      proxy_set_header X-Keygate-Key-Id $keygate_key_id;
      proxy_set_header Authorization "";
      proxy_set_header X-Api-Key "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;

      proxy_pass ${backend};
    }
    # -------------------------------------------------------------------
  }
}
`;
}

interface RawResponse {
  status: number;
  headers: Headers;
  body: string;
}

/** One HTTP/1.0 request over nginx's Unix socket (HTTP/1.0: no chunked answer to decode). */
async function requestOverSocket(
  path: string,
  target: string,
  headers: Record<string, string> = {},
  method = "GET",
  body = "",
): Promise<RawResponse> {
  const connection = await Deno.connect({ transport: "unix", path });
  const lines = [`${method} ${target} HTTP/1.0`, "Host: backend.test"];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  if (body !== "") lines.push(`Content-Length: ${new TextEncoder().encode(body).byteLength}`);
  await connection.write(new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n" + body));
  const text = await new Response(connection.readable).text();
  const [head, ...rest] = text.split("\r\n\r\n");
  const [statusLine, ...headerLines] = head.split("\r\n");
  const responseHeaders = new Headers();
  for (const line of headerLines) {
    const colon = line.indexOf(":");
    responseHeaders.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  return {
    status: Number(statusLine.split(" ")[1]),
    headers: responseHeaders,
    body: rest.join("\r\n\r\n"),
  };
}

async function waitForFile(path: string, child: Deno.ChildProcess, logPath: string) {
  for (let i = 0; i < 100; i++) {
    try {
      Deno.statSync(path);
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  child.kill("SIGKILL");
  throw new Error(`nginx did not start: ${Deno.readTextFileSync(logPath)}`);
}

Deno.test({
  name: "[nginx] auth_request with /api/userservice/verify protects a backend (docs/deploy.md)",
  ignore: NGINX === undefined,
  async fn() {
    const app = await createTestApp();
    const userId = await app.addUser("alice@example.org", "pw");
    const apiKey = await app.createKey(userId);
    const token = await issueToken(app.handler, "alice@example.org", "pw", apiKey);
    const keyId = (await app.store.listApiKeys(userId))[0].id;

    const seen: { path: string; headers: Headers; body: string }[] = [];
    const backend = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (r) => {
      const url = new URL(r.url);
      seen.push({ path: url.pathname + url.search, headers: r.headers, body: await r.text() });
      return new Response(`backend saw ${url.pathname}`);
    });
    const keygate = await startTlsServer(app.handler);
    const dir = Deno.makeTempDirSync({ prefix: "keygate-nginx-" });
    Deno.chmodSync(dir, 0o755);
    Deno.writeTextFileSync(`${dir}/keygate-ca.pem`, (await testCertificate()).cert);
    Deno.writeTextFileSync(
      `${dir}/nginx.conf`,
      nginxConfig(dir, keygate.origin, `http://127.0.0.1:${backend.addr.port}`),
    );
    const child = new Deno.Command(NGINX!, {
      args: ["-p", dir, "-c", `${dir}/nginx.conf`, "-e", `${dir}/error.log`],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const socket = `${dir}/nginx.sock`;
    try {
      await waitForFile(socket, child, `${dir}/error.log`);

      // Secure path with key and token: reaches the backend with the identity, without credentials.
      const ok = await requestOverSocket(
        socket,
        `/api/secure/donations?api_key=${apiKey}`,
        {
          Authorization: `Bearer ${token}`,
          "X-Keygate-User": "999",
          "Content-Type": "application/json",
        },
        "POST",
        '{"amount":"5"}',
      );
      assert.equal(ok.status, 200, ok.body);
      assert.equal(ok.body, "backend saw /api/secure/donations");
      assert.equal(seen.length, 1);
      assert.equal(seen[0].body, '{"amount":"5"}');
      assert.equal(seen[0].headers.get("x-keygate-user"), String(userId));
      assert.equal(seen[0].headers.get("x-keygate-email"), "alice@example.org");
      assert.equal(seen[0].headers.get("x-keygate-key-id"), String(keyId));
      assert.equal(seen[0].headers.get("authorization"), null);

      // No token: keygate's own 401 error_response reaches the client; the backend sees nothing.
      const refused = await requestOverSocket(socket, `/api/secure/donations?api_key=${apiKey}`, {
        Accept: "application/json",
      });
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get("content-type"), "application/json; charset=utf-8");
      assert.equal(
        JSON.parse(refused.body).error_response.errors.error[0].error_code,
        "invalid_token",
      );
      assert.match(refused.headers.get("www-authenticate") ?? "", /invalid_token/);
      // Any spelling of "secure" is secure behind nginx too.
      const spelled = await requestOverSocket(socket, `/api/%73ecure/donations?api_key=${apiKey}`);
      assert.equal(spelled.status, 401);
      assert.match(spelled.body, /<error_code>invalid_token<\/error_code>/);

      // A public path needs the API key only.
      const open = await requestOverSocket(socket, "/api/public/projects", { "X-Api-Key": apiKey });
      assert.equal(open.status, 200);
      const anonymous = await requestOverSocket(socket, "/api/public/projects");
      assert.equal(anonymous.status, 401);
      assert.match(anonymous.body, /invalid_api_key/);
      assert.equal(seen.length, 2);
      assert.equal(seen[1].headers.get("x-api-key"), null);
    } finally {
      child.kill("SIGTERM");
      await child.status;
      await keygate.close();
      await backend.shutdown();
      app.close();
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
