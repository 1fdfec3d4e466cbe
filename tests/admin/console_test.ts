/**
 * Runs the browser tests of the web console (console_browser.ts) in a
 * `deno test --allow-all` process of their own: playwright-core needs
 * --allow-all (it reads /proc at load time and starts Chromium), which the
 * rest of the suite does not get. Debian's Chromium is required in CI
 * (.ci/run installs it); elsewhere the test is ignored without it.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";

Deno.test({
  name: "[console] the browser tests in Chromium pass (tests/admin/console_browser.ts)",
  ignore: !existsSync("/usr/bin/chromium") && Deno.env.get("CI") !== "true",
  async fn() {
    const file = new URL("./console_browser.ts", import.meta.url).pathname;
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["test", "--allow-all", "--no-check", file],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const output = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
    assert.equal(code, 0, output);
    assert.match(output, /ok \| 1 passed \(\d+ steps\) \| 0 failed/);
  },
});
