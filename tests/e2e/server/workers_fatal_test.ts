/**
 * With `--workers`, a request worker's failed WAL sync reaches the main thread
 * (src/server/worker_spawn.ts), which stops the whole server (src/server/fatal_stop.ts): the
 * worker's store refuses the revocation whose sync failed (503) and every later write.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Config } from "../../../src/config/settings.ts";
import { readConfig } from "../../../src/config/read_config.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { createWorkerPool } from "../../../src/server/worker_pool.ts";
import { createCapturingLogger } from "../../_helpers/capturing_logger.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
import { testCertificate } from "../../_helpers/tls_server.ts";
import { addUserWithKey } from "../../_helpers/server_process.ts";

Deno.test("[server] a request worker's failed WAL sync is a 503 and reaches the main thread as a fatal stop", async () => {
  const db = tempDbPath();
  const { logger } = createCapturingLogger();
  const hasher = createPasswordHasher({ workers: 1 });
  const { cert, key } = await testCertificate();
  const client = Deno.createHttpClient({ caCerts: [cert] });
  const email = "fatal-worker@example.org";
  const password = "fatal worker test pw";
  try {
    const apiKey = await addUserWithKey(db.path, email, password);
    const config = readConfig(
      [
        ...["--db", db.path, "--port", "0", "--hostname", "127.0.0.1"],
        ...["--workers", "2", "--log-level", "off"],
      ],
      {},
    ) as Config;
    const reasons: string[] = [];
    let raised!: () => void;
    const fatal = new Promise<void>((resolve) => raised = resolve);
    const pool = createWorkerPool({
      config,
      tls: { cert, key },
      hasher,
      logger,
      onFatal: (reason) => {
        reasons.push(reason);
        raised();
      },
      workerUrl: new URL("../../_helpers/failing_sync_worker.ts", import.meta.url),
    });
    try {
      const { port } = await pool.start();
      const origin = `https://localhost:${port}`;
      const json = { "content-type": "application/json", accept: "application/json" };
      const login = await fetch(`${origin}/api/userservice/tokens`, {
        client,
        method: "POST",
        headers: json,
        body: JSON.stringify({ auth_request: { user: { email, password }, api_key: apiKey } }),
      });
      assert.equal(login.status, 200, "a login is not synced");
      const token = (await login.json()).auth_response.access_token;
      const revoked = await fetch(`${origin}/api/userservice/tokens/revoke`, {
        client,
        method: "POST",
        headers: { ...json, "x-api-key": apiKey },
        body: JSON.stringify({ token }),
      });
      assert.equal(revoked.status, 503);
      assert.equal(revoked.headers.get("content-type"), "application/json; charset=utf-8");
      const body = await revoked.text();
      assert.match(body, /"service_unavailable"/);
      assert.doesNotMatch(body, /os error|write-ahead/);
      await fatal;
      assert.deepEqual(reasons, ["Input/output error (os error 5)"]);
      assert.equal(pool.restarts, 0, "no worker died: the main thread decides to stop");
    } finally {
      assert.equal(await pool.drain(5000), true);
    }
  } finally {
    client.close();
    hasher.close();
    db.cleanup();
  }
});
