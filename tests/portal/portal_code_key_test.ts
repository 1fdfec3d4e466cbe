/**
 * `--portal-secret-file` (issue 25): one-time codes stored as HMAC-SHA-256 under a key kept
 * outside the database. The digest a sign-up stores is the keyed one (a database reader
 * without the file cannot test a guess against it), verification and reset work with it, and
 * a missing or short file stops `deno task start` in one line. Both backends
 * (`KEYGATE_TEST_STORE`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { hashCode, isSameDigest } from "../../src/auth/portal/codes.ts";
import { StartupError } from "../../src/config/errors.ts";
import { readPortalSecretFile } from "../../src/config/portal_secret.ts";
import { openTestStore } from "../_helpers/store.ts";
import { runTask } from "../_helpers/task.ts";
import { readCode } from "./_smtp.ts";
import { startPortalRig } from "./_portal.ts";
import { PASSWORD } from "./_portal_answers.ts";

const KEY = new Uint8Array(32).map((_, i) => (i * 37 + 11) & 0xff);

Deno.test("hashCode() with a key is an HMAC: not the unkeyed digest, and each key its own", () => {
  const keyed = hashCode("a@b.org", "ABCDE-FGHJK", KEY);
  assert.equal(keyed.length, 32);
  assert.equal(isSameDigest(keyed, hashCode("a@b.org", "abcde fghjk", KEY)), true, "as typed");
  assert.equal(isSameDigest(keyed, hashSecret("portal-code:a@b.org:ABCDEFGHJK")), false);
  assert.equal(isSameDigest(keyed, hashCode("a@b.org", "ABCDE-FGHJK", KEY.toReversed())), false);
  assert.equal(isSameDigest(keyed, hashCode("c@b.org", "ABCDE-FGHJK", KEY)), false);
});

Deno.test("[e2e] portal: with a code key, the stored digest is keyed, and verify and reset work", async () => {
  await using rig = await startPortalRig({ codeKey: KEY });
  const email = "keyed@example.org";
  (await rig.api("POST", "/signup", { email, password: PASSWORD })).body?.cancel();
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  const user = (await rig.app.store.findUserByEmail(email))!;
  const [stored] = await rig.app.store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  assert.deepEqual(stored.codeHash, hashCode(email, code, KEY));
  assert.notDeepEqual(
    stored.codeHash,
    hashSecret(`portal-code:${email}:${code.replace("-", "")}`),
    "not the unkeyed digest",
  );

  let response = await rig.api("POST", "/verify", { email, code, password: PASSWORD });
  assert.equal(response.status, 200);
  assert.equal((await response.json()).state, "active");

  response = await rig.api("POST", "/forgot", { email });
  assert.equal(response.status, 202);
  await response.body?.cancel();
  const reset = readCode(await rig.smtp.waitFor(email, "Reset"));
  const [resetStored] = await rig.app.store.findPortalCodes(user.id, "reset", rig.app.clock.now());
  assert.deepEqual(resetStored.codeHash, hashCode(email, reset, KEY));
  response = await rig.api("POST", "/reset", {
    email,
    code: reset,
    password: "a brand new secret 7",
  });
  assert.equal(response.status, 200);
  await response.body?.cancel();
});

Deno.test("readPortalSecretFile() reads the key, and refuses a missing or short file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/portal.key`;
    await Deno.writeFile(path, KEY);
    assert.deepEqual(readPortalSecretFile(path), KEY);
    await Deno.writeFile(path, KEY.slice(0, 31));
    assert.throws(() => readPortalSecretFile(path), (error: unknown) => {
      assert.ok(error instanceof StartupError);
      assert.equal(error.exitCode, 2);
      assert.match(error.message, /holds 31 bytes; it needs at least 32 random bytes/);
      return true;
    });
    assert.throws(() => readPortalSecretFile(`${dir}/missing`), (error: unknown) => {
      assert.ok(error instanceof StartupError);
      assert.equal(error.exitCode, 1);
      assert.match(error.message, /no such file or directory/);
      return true;
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("[server] portal: a short --portal-secret-file stops the start: one line, exit 2, no key", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/portal.key`;
    await Deno.writeTextFile(path, "SHORTSECRET");
    await using opened = await openTestStore();
    const store = /^postgres(ql)?:\/\//.test(opened.path) ? "--store" : "--db";
    const run = await runTask("start", [
      "--port",
      "0",
      store,
      opened.path,
      "--portal",
      "on",
      "--smtp-url",
      "smtp://mail.test",
      "--mail-from",
      "keys@example.org",
      "--portal-origin",
      "https://keys.example.org",
      "--portal-secret-file",
      path,
    ], { timeoutMs: 30_000 });
    assert.equal(run.code, 2, run.err);
    assert.equal(
      run.err,
      `keygate: --portal-secret-file "${path}" holds 11 bytes; it needs at least 32 random ` +
        "bytes (openssl rand -out FILE 32)\n",
    );
    assert.doesNotMatch(run.err + run.out, /SHORTSECRET/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
