/**
 * `--workers N` and revocation: a revocation by the admin CLI or the admin API is refused at
 * once by every request worker, with `--store-listen` on or off (the process's shared grant
 * counter, not a notification, makes it exact). Every request opens a connection of its own,
 * and `x-request-id` (whose prefix each worker draws at start) tells which worker answered.
 */
import assert from "node:assert/strict";
import { runAdmin } from "../../_helpers/admin_cli.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { testCertificate } from "../../_helpers/tls_server.ts";
import { addUserWithKey, startServerProcess } from "../../_helpers/server_process.ts";
import { POSTGRES_SKIP, sharedPostgres } from "../../_helpers/postgres_cluster.ts";
import {
  assertRevokedOnEveryWorker,
  CURRENT,
  deleteCurrentToken,
  fetchFresh,
  issueToken,
  PASSWORD,
} from "../../_helpers/worker_requests.ts";

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
