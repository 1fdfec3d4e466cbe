/**
 * The portal's start-up refusals as the process an operator runs (`deno task start …`): each
 * is one line on standard error and exit 2, with no secret in it. Both backends
 * (`KEYGATE_TEST_STORE`); the settings are refused before the store is opened.
 *
 * @module
 */
import assert from "node:assert/strict";
import { openTestStore } from "../_helpers/store.ts";
import { runTask } from "../_helpers/task.ts";

/** `deno task start` with the portal's settings and the test store, until it exits. */
async function start(args: string[]) {
  await using opened = await openTestStore();
  const store = /^postgres(ql)?:\/\//.test(opened.path) ? "--store" : "--db";
  return await runTask("start", ["--port", "0", store, opened.path, "--portal", "on", ...args], {
    timeoutMs: 30_000,
  });
}

Deno.test("[server] portal: --portal on without --portal-origin is refused: one line, exit 2", async () => {
  const run = await start(["--smtp-url", "smtp://mail.test", "--mail-from", "keys@example.org"]);
  assert.equal(run.code, 2, run.err);
  assert.equal(
    run.err,
    "keygate: Invalid portal settings: --portal on needs --portal-origin, the origin its mail " +
      "links point to (--portal is on the command line) (see --help)\n",
  );
});

Deno.test("[server] portal: a malformed escape in --smtp-url is refused: one line, exit 2, no secret", async () => {
  const run = await start([
    "--smtp-url",
    "smtp://u:SECRET%ZZ@mail.test",
    "--mail-from",
    "keys@example.org",
    "--portal-origin",
    "https://keys.example.org",
  ]);
  assert.equal(run.code, 2, run.err);
  assert.equal(run.err.trimEnd().split("\n").length, 1, run.err);
  assert.match(run.err, /^keygate: .*--smtp-url.*percent-encoded/);
  assert.doesNotMatch(run.err + run.out, /SECRET/);
});

Deno.test("[server] portal: --portal on without --portal-secret-file is refused: one line, exit 2", async () => {
  const run = await start([
    "--smtp-url",
    "smtp://u:SECRET@mail.test",
    "--mail-from",
    "keys@example.org",
    "--portal-origin",
    "https://keys.example.org",
  ]);
  assert.equal(run.code, 2, run.err);
  assert.equal(
    run.err,
    "keygate: Invalid portal settings: --portal on needs --portal-secret-file, the key of its " +
      "one-time codes' digests (openssl rand -out FILE 32) (--portal is on the command line) " +
      "(see --help)\n",
  );
  assert.doesNotMatch(run.err + run.out, /SECRET/);
});
