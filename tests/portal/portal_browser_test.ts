/**
 * Runs the portal's browser test (portal_browser.ts) in a `deno test --allow-all` process of
 * its own, as tests/admin/console_test.ts does for the console: playwright-core needs
 * --allow-all. Debian's Chromium is required in CI; elsewhere the test is ignored without it.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";

Deno.test({
  name: "[portal] the browser test in Chromium passes (tests/portal/portal_browser.ts)",
  ignore: !existsSync("/usr/bin/chromium") && Deno.env.get("CI") !== "true",
  async fn() {
    const file = new URL("./portal_browser.ts", import.meta.url).pathname;
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["test", "--allow-all", "--no-check", file],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const output = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
    assert.equal(code, 0, output);
    assert.match(output, /ok \| 1 passed \| 0 failed/);
  },
});

Deno.test("[portal] no page script parses text as markup", async () => {
  const dir = new URL("../../src/http/portal/pages/", import.meta.url);
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.name.endsWith(".js")) continue;
    const source = await Deno.readTextFile(new URL(entry.name, dir));
    assert.doesNotMatch(
      source,
      /innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment/,
      entry.name,
    );
  }
});
