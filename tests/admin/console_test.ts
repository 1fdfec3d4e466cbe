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

Deno.test("[console] no script parses text as markup: every stored name or label is a text node", async () => {
  const dir = new URL("../../src/http/admin/console/", import.meta.url);
  const files: string[] = [];
  const walk = async (at: URL) => {
    for await (const entry of Deno.readDir(at)) {
      if (entry.isDirectory) await walk(new URL(`${entry.name}/`, at));
      else if (entry.name.endsWith(".js")) files.push(new URL(entry.name, at).pathname);
    }
  };
  await walk(dir);
  assert.ok(files.length >= 5, files.join());
  for (const file of files) {
    const source = await Deno.readTextFile(file);
    // dom.js names innerHTML in its doc comment only: compare code, not comments.
    const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
    assert.doesNotMatch(
      code,
      /innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment/,
      file,
    );
  }
});
