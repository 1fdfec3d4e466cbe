/**
 * The outbox survives a crash: the server commits a sign-up (and its mail) while the mail
 * server is down, is killed with SIGKILL before any send could succeed, and restarts with the
 * mail server up: the message goes out exactly once, and its code (the stored one) verifies.
 * Both backends (`KEYGATE_TEST_STORE`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { openTestStore } from "../_helpers/store.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { startServerProcess } from "../_helpers/server_process.ts";
import { readCode, startTestSmtp } from "./_smtp.ts";

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

Deno.test({
  name: "[server] portal: a mail committed before a kill -9 goes out once after the restart",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const tls = await testCertificate();
    await using opened = await openTestStore();
    const dir = await Deno.makeTempDir({ prefix: "keygate-portal-crash-" });
    const caFile = `${dir}/smtp-ca.pem`;
    await Deno.writeTextFile(caFile, tls.cert);
    await Deno.writeFile(`${dir}/portal.key`, crypto.getRandomValues(new Uint8Array(32)));
    const smtpPort = freePort();
    const args = [
      "--portal",
      "on",
      "--smtp-url",
      `smtp://user:secret@localhost:${smtpPort}`,
      "--mail-from",
      "portal@keygate.test",
      "--portal-origin",
      "https://keys.example.org",
      "--self-signed-dir",
      dir,
      "--portal-secret-file",
      `${dir}/portal.key`,
    ];
    const env = { DENO_CERT: caFile };
    const email = "crash@example.org";
    try {
      const first = await startServerProcess(opened.path, args, { env });
      const cert = await Deno.readTextFile(`${dir}/keygate-cert.pem`);
      const client = Deno.createHttpClient({ caCerts: [cert] });
      let response = await fetch(`${first.origin}/api/portal/v1/signup`, {
        method: "POST",
        client,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email, password: "a long enough secret" }),
      });
      assert.equal(response.status, 202, await response.clone().text());
      await response.body?.cancel();
      // Committed, not sent (the mail server is down): kill -9 now, perhaps while the first
      // attempt holds its lease (MAIL_LEASE_MS), which the restarted server then waits out.
      first.child.kill("SIGKILL");
      await first.exited();
      assert.equal(await opened.store.countQueuedMail(), 1);
      assert.equal(
        first.lines.some((line) => line.includes("secret@") || line.includes(":secret")),
        false,
        "no credentials in the log",
      );

      await using smtp = await startTestSmtp(tls, { port: smtpPort });
      const second = await startServerProcess(opened.path, args, { env });
      try {
        const mail = await smtp.waitFor(email, "Verify", { timeoutMs: 40_000 }).catch((e) => {
          console.log(first.lines.join("\n"), second.lines.join("\n"), second.errors.join("\n"));
          throw e;
        });
        await new Promise((resolve) => setTimeout(resolve, 2500));
        assert.equal(smtp.received.length, 1, "exactly once");
        assert.equal(await opened.store.countQueuedMail(), 0);
        response = await fetch(`${second.origin}/api/portal/v1/verify`, {
          method: "POST",
          client,
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email, code: readCode(mail), password: "a long enough secret" }),
        });
        assert.equal(response.status, 200, await response.clone().text());
        assert.equal((await response.json()).state, "active");
      } finally {
        await second.stop();
        client.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
