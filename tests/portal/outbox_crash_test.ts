/**
 * The outbox survives a crash: the server commits a sign-up (and its mail) while the mail
 * server is down, is killed with SIGKILL before any send could succeed, and restarts with the
 * mail server up: the message goes out exactly once (the SMTP server's messages, counted once the
 * restarted server is stopped, and its log), and its code (the stored one) verifies.
 * Both backends (`KEYGATE_TEST_STORE`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { openTestStore } from "../_helpers/store.ts";
import { testCertificate } from "../_helpers/tls_server.ts";
import { startServerProcess } from "../_helpers/server_process.ts";
import { readCode, startTestSmtp } from "./_smtp.ts";
import { hashCode } from "../../src/auth/portal/codes.ts";
import type { Store } from "../../src/store/store.ts";
import { findFreePort } from "../_helpers/free_port.ts";

/** Resolves once the outbox holds a sent message (at most 40 s). */
async function waitForSent(store: Store): Promise<void> {
  const until = Date.now() + 40_000;
  while ((await store.countMail()).sent === 0) {
    if (Date.now() > until) throw new Error("The outbox's message was never marked sent");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
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
    const codeKey = crypto.getRandomValues(new Uint8Array(32));
    await Deno.writeFile(`${dir}/portal.key`, codeKey);
    const smtpPort = findFreePort();
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
      assert.equal((await opened.store.countMail()).pending, 1);
      assert.equal(
        first.lines.some((line) => line.includes("secret@") || line.includes(":secret")),
        false,
        "no credentials in the log",
      );

      await using smtp = await startTestSmtp(tls, { port: smtpPort });
      const second = await startServerProcess(opened.path, args, { env });
      let mailed = { subject: "", code: "" };
      try {
        const mail = await smtp.waitFor(email, "Verify", { timeoutMs: 40_000 }).catch((e) => {
          console.log(first.lines.join("\n"), second.lines.join("\n"), second.errors.join("\n"));
          throw e;
        });
        // Once the message is marked sent, no sender takes it again: wait for that, not a time.
        await waitForSent(opened.store);
        // The code mailed is the one stored (its digest), and it verifies.
        const code = readCode(mail);
        mailed = { subject: mail.subject, code };
        const user = (await opened.store.findUserByEmail(email))!;
        const stored = await opened.store.findPortalCodes(user.id, "verify", Date.now());
        assert.equal(stored.length, 1, "one code, made before the kill");
        assert.deepEqual(stored[0].codeHash, new Uint8Array(hashCode(email, code, codeKey)));
        response = await fetch(`${second.origin}/api/portal/v1/verify`, {
          method: "POST",
          client,
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email, code, password: "a long enough secret" }),
        });
        assert.equal(response.status, 200, await response.clone().text());
        assert.equal((await response.json()).state, "active");
      } finally {
        await second.stop();
        client.close();
      }
      // The second server is gone: what the mail server received is final. Exactly one message,
      // to the address, with that code; the second server logged one send and no credentials.
      const received = smtp.received.filter((m) => m.to.includes(email));
      assert.equal(received.length, 1, "exactly once");
      assert.equal(smtp.received.length, 1, "no other message");
      assert.deepEqual({ subject: received[0].subject, code: readCode(received[0]) }, mailed);
      assert.deepEqual(await opened.store.countMail(), {
        pending: 0,
        sent: 1,
        givenUp: 0,
        failedAttempts: (await opened.store.countMail()).failedAttempts,
      });
      const output = [...second.lines, ...second.errors];
      assert.equal(
        output.filter((line) => line.includes('"mail sent"')).length,
        1,
        output.join("\n"),
      );
      assert.equal(output.filter((line) => line.includes("mail given up")).length, 0);
      assert.equal(
        output.some((line) => line.includes("secret@") || line.includes(":secret")),
        false,
        "no credentials in the second server's log",
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
