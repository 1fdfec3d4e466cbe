/**
 * A failed WAL sync stops the server (src/server/fatal_stop.ts): the revocation whose sync
 * failed is a 503 with a generic body, the server drains and `serve()` resolves to 1 with
 * nothing left open; the log has one error line with the disk's message.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { serve } from "../../main.ts";
import { createFatalStop, FATAL_EXIT_CODE } from "../../src/server/fatal_stop.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { addUserWithKey } from "../_helpers/server_process.ts";
import { findFreePort } from "../_helpers/free_port.ts";

Deno.test("createFatalStop() logs one error line with the reason, at the first raise only", async () => {
  const lines: string[] = [];
  const fatal = createFatalStop(createLogger({ level: "info", write: (line) => lines.push(line) }));
  assert.equal(fatal.raised(), false);
  fatal.raise("Input/output error (os error 5)");
  fatal.raise("No space left on device (os error 28)");
  await fatal.requested;
  assert.equal(fatal.raised(), true);
  assert.equal(lines.length, 1);
  const line = JSON.parse(lines[0]);
  assert.equal(line.level, "error");
  assert.equal(line.msg, "store failed: stopping, restart keygate to recover the database");
  assert.equal(line.event, "store_fatal");
  assert.equal(line.error, "Input/output error (os error 5)");
  assert.equal(line.exit_code, FATAL_EXIT_CODE);
});

Deno.test("[server] serve() after a failed WAL sync: the revocation is a 503, then exit 1 with the store closed", async () => {
  const db = tempDbPath();
  const { cert, key } = await testCertificate();
  const client = Deno.createHttpClient({ caCerts: [cert] });
  try {
    const email = "fatal@example.org";
    const password = "fatal stop test pw";
    const apiKey = await addUserWithKey(db.path, email, password);
    await Deno.writeTextFile(`${db.dir}/cert.pem`, cert);
    await Deno.writeTextFile(`${db.dir}/key.pem`, key);
    const port = findFreePort();
    let syncs = 0;
    const result = serve(
      [
        ...["--db", db.path, "--hostname", "127.0.0.1", "--port", String(port)],
        ...["--cert", `${db.dir}/cert.pem`, "--key", `${db.dir}/key.pem`, "--log-level", "off"],
      ],
      {},
      {
        name: "fatal stop test",
        runWalSync: () => {
          syncs++;
          return Promise.reject(new Error("Input/output error (os error 5)"));
        },
      },
    );
    const origin = `https://localhost:${port}`;
    let status = 0;
    for (let i = 0; i < 200 && status !== 200; i++) {
      try {
        const response = await fetch(`${origin}/healthz`, { client });
        await response.body?.cancel();
        status = response.status;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    assert.equal(status, 200);
    const json = { "content-type": "application/json", accept: "application/json" };
    const login = await fetch(`${origin}/api/userservice/tokens`, {
      client,
      method: "POST",
      headers: json,
      body: JSON.stringify({ auth_request: { user: { email, password }, api_key: apiKey } }),
    });
    assert.equal(login.status, 200, "a login is not synced");
    const token = (await login.json()).auth_response.access_token;
    assert.equal(syncs, 0);
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
    assert.doesNotMatch(body, /os error|write-ahead/, "the disk's message stays in the log");
    assert.equal(await result, 1, "the server stops by itself, for its supervisor to restart");
    assert.equal(syncs, 1);
    // The commit was applied; SQLite recovers it from the WAL when the server starts again.
    const reader = new DatabaseSync(db.path, { readOnly: true });
    try {
      const rows = reader.prepare("SELECT revoked_at FROM tokens").all();
      assert.equal(rows.length, 1);
      assert.notEqual(rows[0].revoked_at, null);
    } finally {
      reader.close();
    }
  } finally {
    client.close();
    db.cleanup();
  }
});
