/**
 * The admin CLI as an operator runs it: the real command in a child process,
 * asserting the exit code, the one line it prints and the database afterwards.
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";
// The CLI as a child process: `cli(dbPath, args, stdin)`.
import { runAdminProcess as cli } from "../../_helpers/admin_cli.ts";
import { addUser, assertFails } from "../../_helpers/admin_cli_process.ts";

Deno.test("[cli] control characters: refused in new labels and e-mails (exit 2), escaped when stored rows are printed", async () => {
  using db = tempDbPath();
  await addUser(db.path, "k@b.org");
  assertFails(
    await cli(db.path, ["key", "create", "k@b.org", "--label", "red\x1b[31m"]),
    2,
    "keygate admin: Invalid label: control, invisible and bidirectional characters are not allowed (found U+001B)",
  );
  assertFails(
    await cli(db.path, ["user", "add", "x\x9b@b.org"], "a good password\n"),
    2,
    String
      .raw`keygate admin: Invalid e-mail "x\u009b@b.org": control, invisible and bidirectional characters are not allowed (found U+009B)`,
  );
  assertFails(
    await cli(db.path, ["user", "rename", "k@b.org", "k\x07@b.org"]),
    2,
    String
      .raw`keygate admin: Invalid e-mail "k\u0007@b.org": control, invisible and bidirectional characters are not allowed (found U+0007)`,
  );
  assert.deepEqual(
    await db.withStore(async (s) => [
      (await s.listApiKeys()).length,
      (await s.listUsers()).map((u) => u.email),
    ]),
    [0, ["k@b.org"]],
  );

  // Rows stored before such characters were refused.
  const email = "old\x1b]0;x\x07\x9b@b.org";
  const label = "red\x1b[31m\nfake line\x9b2J\x7f";
  await db.withStore(async (store) => {
    const user = await store.insertUser(
      { email, passwordHash: "x", tokenTimeoutSeconds: null },
      { now: 0, audit: undefined },
    );
    await store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret("abcd1111-0000-4000-8000-000000000001"),
      prefix: "abcd1111",
      label,
      expiresAt: null,
      introspect: false,
    }, { now: 0, audit: undefined });
  });
  // deno-lint-ignore no-control-regex
  const raw = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;
  const table = await cli(db.path, ["key", "list"]);
  assert.equal(table.code, 0, table.err);
  assert.doesNotMatch(table.out, raw);
  assert.equal(table.out.split("\n").length, 3, "a header, one row, no fake line");
  assert.ok(table.out.includes(String.raw`red\u001b[31m\u000afake line\u009b2J\u007f`));
  assert.ok(table.out.includes(String.raw`old\u001b]0;x\u0007\u009b@b.org`));
  const json = await cli(db.path, ["key", "list", "--json"]);
  assert.equal(json.code, 0, json.err);
  assert.doesNotMatch(json.out, raw);
  assert.deepEqual(
    JSON.parse(json.out).map((k: { email: string; label: string }) => [k.email, k.label]),
    [[email, label]],
  );
  const users = await cli(db.path, ["user", "list"]);
  assert.doesNotMatch(users.out, raw);
  assert.ok(users.out.includes(String.raw`old\u001b]0;x\u0007\u009b@b.org`));
  const disabled = await cli(db.path, ["user", "disable", email]);
  assert.equal(disabled.code, 0, disabled.err);
  assert.equal(
    disabled.out,
    String.raw`Disabled old\u001b]0;x\u0007\u009b@b.org; 0 live token(s) revoked` + "\n",
  );
});

Deno.test("[cli] invisible and bidirectional characters: refused (exit 2), escaped when stored rows are printed", async () => {
  using db = tempDbPath();
  await addUser(db.path, "k@b.org");
  assertFails(
    await cli(db.path, ["user", "add", "ann\u200b@example.org"], "a good password\n"),
    2,
    String.raw`keygate admin: Invalid e-mail "ann\u200b@example.org": control, invisible and ` +
      "bidirectional characters are not allowed (found U+200B)",
  );
  assertFails(
    await cli(db.path, ["key", "create", "k@b.org", "--label", "billing\u202etxt.exe"]),
    2,
    "keygate admin: Invalid label: control, invisible and bidirectional characters are not " +
      "allowed (found U+202E)",
  );
  assertFails(
    await cli(db.path, ["key", "create", "k@b.org", "--label", "no\u00a0break"]),
    2,
    /found U\+00A0\)$/,
  );
  assertFails(
    await cli(db.path, ["user", "rename", "k@b.org", "k\u2066@b.org"]),
    2,
    /found U\+2066\)$/,
  );
  assert.equal(await db.withStore(async (s) => (await s.listApiKeys()).length), 0);

  // Rows stored before the rule: printed escaped in tables, JSON and the audit log.
  const email = "ann\u200b@example.org";
  const label = "billing\u202etxt.exe";
  await db.withStore(async (store) => {
    const user = await store.insertUser(
      { email, passwordHash: "x", tokenTimeoutSeconds: null },
      { now: 0, audit: { at: 0, actor: "cli:x", action: "user.added", subject: `user:${email}` } },
    );
    await store.insertApiKey({
      userId: user.id,
      keyHash: hashSecret("abcd1111-0000-4000-8000-000000000002"),
      prefix: "abcd1111",
      label,
      expiresAt: null,
      introspect: false,
    }, { now: 0, audit: undefined });
  });
  const hidden = /[\u200b\u202e]/;
  const table = await cli(db.path, ["key", "list"]);
  assert.equal(table.code, 0, table.err);
  assert.doesNotMatch(table.out, hidden);
  assert.ok(table.out.includes(String.raw`billing\u202etxt.exe`), table.out);
  assert.ok(table.out.includes(String.raw`ann\u200b@example.org`), table.out);
  const json = await cli(db.path, ["key", "list", "--json"]);
  assert.doesNotMatch(json.out, hidden);
  assert.ok(JSON.parse(json.out).some((k: { label: string }) => k.label === label));
  const audit = await cli(db.path, ["audit"]);
  assert.equal(audit.code, 0, audit.err);
  assert.doesNotMatch(audit.out, hidden);
  assert.ok(audit.out.includes(String.raw`user:ann\u200b@example.org`), audit.out);
});
