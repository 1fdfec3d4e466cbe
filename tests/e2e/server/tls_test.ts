/**
 * TLS 1.2 and 1.3 only, verified rather than assumed: `openssl s_client`
 * offers each protocol version alone to the real handler served over TLS.
 * Skipped when `openssl` is not installed.
 */
import assert from "node:assert/strict";
import { createTestApp } from "../../_helpers/test_app.ts";
import { startTlsServer } from "../../_helpers/tls_server.ts";

function hasOpenssl(): boolean {
  try {
    return new Deno.Command("openssl", { args: ["version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** Runs `openssl s_client` with only `version` enabled; returns its exit code and output. */
async function handshake(port: number, version: string) {
  const output = await new Deno.Command("openssl", {
    args: [
      "s_client",
      "-connect",
      `127.0.0.1:${port}`,
      "-servername",
      "localhost",
      version,
      // Security level 0 lets OpenSSL 3 offer TLS 1.0 and 1.1 at all, so that a refusal
      // comes from the server, not from the client.
      "-cipher",
      "DEFAULT@SECLEVEL=0",
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { code: output.code, text: decoder.decode(output.stdout) + decoder.decode(output.stderr) };
}

Deno.test({
  name: "[server] TLS: 1.2 and 1.3 complete a handshake, 1.0 and 1.1 are refused by the server",
  ignore: !hasOpenssl(),
  async fn() {
    using app = await createTestApp();
    await using server = await startTlsServer(app.handler);
    const port = Number(new URL(server.origin).port);

    for (const [flag, name] of [["-tls1_2", "TLSv1.2"], ["-tls1_3", "TLSv1.3"]]) {
      const { code, text } = await handshake(port, flag);
      assert.equal(code, 0, text);
      assert.match(text, new RegExp(`New, ${name.replace("../..", "\\.")}, Cipher is \\S+`), flag);
    }
    for (const [flag, name] of [["-tls1", "TLSv1"], ["-tls1_1", "TLSv1.1"]]) {
      const { code, text } = await handshake(port, flag);
      assert.notEqual(code, 0, text);
      // The client did offer the old version, and the server answered with an alert.
      assert.match(text, new RegExp(`Protocol\\s*: ${name.replace("../..", "\\.")}\\n`), flag);
      assert.match(text, /Cipher is \(NONE\)/, flag);
      assert.match(text, /alert/, flag);
    }
  },
});
