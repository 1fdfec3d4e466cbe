/**
 * The systemd unit of docs/deploy.md passes `systemd-analyze verify`.
 * Skipped where systemd-analyze is not installed.
 */
import assert from "node:assert/strict";
import { hasCommand, readDeployBlock } from "./_proxy.ts";

Deno.test({
  name: "docs/deploy.md's systemd unit passes systemd-analyze verify",
  ignore: !hasCommand("systemd-analyze"),
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "keygate-unit-" });
    try {
      const unit = readDeployBlock("ini");
      assert.match(unit, /^ExecStart=\/usr\/local\/bin\/keygate serve /m);
      // verify wants the executable to exist; the binary is not built here.
      Deno.writeTextFileSync(
        `${dir}/keygate.service`,
        unit.replace("/usr/local/bin/keygate serve", "/bin/true serve"),
      );
      const output = await new Deno.Command("systemd-analyze", {
        args: ["verify", `${dir}/keygate.service`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(output.stdout) +
        new TextDecoder().decode(output.stderr);
      assert.equal(output.code, 0, text);
      assert.equal(text.trim(), "", "no unknown key or bad value");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
