/**
 * The admin CLI as an operator runs it: the real command in a child process,
 * asserting the exit code, the one line it prints and the database afterwards.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { VERSION } from "../../../src/config/version.ts";
import { describeSkippedEmails } from "../../../src/store/canonical_emails.ts";
import { writePreNfcDatabase } from "../../_helpers/pre_nfc_db.ts";
import { addTestToken, querySqlAt } from "../../_helpers/store.ts";
import { tempDbPath, withSqliteStore } from "../../_helpers/temp_db.ts";
// The CLI as a child process: `cli(dbPath, args, stdin)`.
import { runAdminProcess as cli } from "../../_helpers/admin_cli.ts";
import { addUser, assertFails } from "../../_helpers/admin_cli_process.ts";

Deno.test("[cli] a password argument is refused with the reason, and nothing is written", async () => {
  using db = tempDbPath();
  const result = await cli(db.path, ["user", "add", "a@b.org", "hunter2"], "x\n");
  assertFails(
    result,
    2,
    "keygate admin: Unexpected argument after EMAIL: passwords are read from standard input, " +
      "never from arguments (they would stay in shell history)",
  );
  assert.ok(!result.err.includes("hunter2"), "the password is not echoed");
  assert.equal(existsSync(db.path), false, "no database was created");
  await addUser(db.path, "a@b.org");
  assertFails(
    await cli(db.path, ["user", "set-password", "a@b.org", "hunter2"]),
    2,
    /passwords are read from standard input, never from arguments/,
  );
});

Deno.test("[cli] extra arguments, unknown options and missing arguments are usage errors (exit 2)", async () => {
  using db = tempDbPath();
  await addUser(db.path, "bob@x.org");
  assertFails(
    await cli(db.path, ["user", "disable", "bob@x.org", "extra"]),
    2,
    'keygate admin: Unexpected argument "extra" (usage: deno task admin user disable EMAIL)',
  );
  assert.equal(
    await db.withStore(async (s) => (await s.findUserByEmail("bob@x.org"))!.disabled),
    false,
  );
  assertFails(
    await cli(db.path, ["user", "list", "--frob"]),
    2,
    'keygate admin: Unknown option "--frob" (see deno task admin help)',
  );
  assertFails(
    await cli(db.path, ["user", "disable"]),
    2,
    "keygate admin: Missing EMAIL (usage: deno task admin user disable EMAIL)",
  );
  assertFails(
    await cli(db.path, ["key", "create", "bob@x.org", "--json=maybe"]),
    2,
    'keygate admin: Invalid --json "maybe": expected on, off, true, false, 1 or 0',
  );
  assertFails(
    await cli(db.path, ["frob"]),
    2,
    'keygate admin: Unknown command "frob" (see deno task admin help)',
  );
  assertFails(
    await cli(db.path, ["user", "frob"]),
    2,
    'keygate admin: Unknown command "user frob" (see deno task admin user --help)',
  );
  assert.equal(await db.withStore(async (s) => (await s.listApiKeys()).length), 0);
});

Deno.test("[cli] help: admin, admin help, a group alone, per-command help; --version", async () => {
  for (const args of [[], ["help"], ["--help"], ["-h"]]) {
    const result = await cli(undefined, args);
    assert.equal(result.code, 0, args.join(" "));
    assert.match(result.out, /^keygate admin: manage users, API keys and tokens\n/);
    assert.match(result.out, /\n {2}user delete EMAIL +Delete the user/);
    for (const line of result.out.split("\n")) assert.ok(line.length <= 100, line);
  }
  for (const group of ["user", "key", "token", "throttle", "db"]) {
    const result = await cli(undefined, [group]);
    assert.equal(result.code, 0, group);
    assert.equal(result.err, "");
    assert.match(result.out, new RegExp(`^deno task admin ${group}: `));
    assert.match(result.out, new RegExp(`\\n {2}${group} [a-z-]+`));
  }
  const rotate = await cli(undefined, ["key", "rotate", "--help"]);
  assert.equal(rotate.code, 0);
  assert.match(rotate.out, /^Usage: deno task admin key rotate KEY \[--grace DURATION\]\n/);
  assert.match(rotate.out, /\n {2}KEY +The key's numeric id/);
  assert.match(rotate.out, /\n {2}--grace DURATION +How long the old key/);
  assert.equal((await cli(undefined, ["help", "key", "rotate"])).out, rotate.out);
  for (const args of [["--version"], ["user", "add", "--version"]]) {
    const result = await cli(undefined, args);
    assert.equal(result.code, 0);
    assert.equal(result.out, `keygate ${VERSION}\n`);
  }
});

Deno.test("[cli] read-only commands on a missing database fail and create nothing", async () => {
  using db = tempDbPath();
  const typo = `${db.dir}/keygte.sqlite3`;
  for (const args of [["user", "list"], ["key", "list"], ["audit"], ["db", "check"]]) {
    assertFails(
      await cli(typo, args),
      1,
      `keygate admin: No database at "${typo}": check --db or KEYGATE_DB (nothing was ` +
        "created; deno task admin user add creates one)",
    );
  }
  assertFails(
    await cli(typo, ["user", "disable", "a@b.org"]),
    1,
    /^keygate admin: No database at/,
  );
  assert.deepEqual([...Deno.readDirSync(db.dir)], [], "no file was left behind");
  assertFails(
    await cli(db.dir, ["user", "list"]),
    2,
    `keygate admin: Invalid --db "${db.dir}": it is a directory, not a database file`,
  );
});

Deno.test("[cli] user rename and user delete (with keys, tokens and counters; audited)", async () => {
  using db = tempDbPath();
  await addUser(db.path, "old@b.org");
  await addUser(db.path, "other@b.org");
  const key = JSON.parse((await cli(db.path, ["key", "create", "old@b.org", "--json"])).out);
  await db.withStore((store) =>
    addTestToken(store, {
      userId: 1,
      apiKeyId: key.id,
      issuedAt: Date.now(),
      expiresAt: Date.now() + 3_600_000,
    })
  );

  assertFails(
    await cli(db.path, ["user", "rename", "old@b.org", "other@b.org"]),
    1,
    'keygate admin: Cannot rename old@b.org: user "other@b.org" already exists',
  );
  const renamed = await cli(db.path, ["user", "rename", "OLD@b.org", "New@b.org"]);
  assert.equal(renamed.code, 0, renamed.err);
  assert.equal(renamed.out, "Renamed user 1 from old@b.org to new@b.org\n");
  assert.equal(
    await db.withStore(async (s) => (await s.findUserById(1))!.email),
    "new@b.org",
  );

  const tokens = await cli(db.path, ["token", "list", "new@b.org", "--json"]);
  assert.equal(tokens.code, 0, tokens.err);
  const [row] = JSON.parse(tokens.out);
  assert.deepEqual(Object.keys(row), [
    "id",
    "api_key",
    "issued_at",
    "expires_at",
    "status",
    "revoked_at",
  ]);
  assert.equal(row.status, "live");
  assert.ok(!tokens.out.includes("t".repeat(40)));

  const deleted = await cli(db.path, ["user", "delete", "new@b.org"]);
  assert.equal(deleted.code, 0, deleted.err);
  assert.equal(
    deleted.out,
    "Deleted user new@b.org (id 1) with 1 API key(s) and 1 token row(s)\n",
  );
  assert.equal(deleted.err, "", "the audit line is not printed without --log");
  await db.withStore(async (store) => {
    assert.equal(await store.findUserById(1), undefined);
    assert.equal((await store.listApiKeys()).length, 0);
    assert.equal(await store.countRows("tokens"), 0);
    assert.ok(await store.findUserByEmail("other@b.org"));
    // The user's rows keep its history under an opaque id (user_delete_audit_test.ts).
    const audit = (await store.listAudit()).map((a) => [a.actor, a.action, a.subject]);
    const ref = audit.at(-1)![2];
    assert.match(ref, /^user:deleted:/);
    assert.deepEqual(audit.slice(-2), [
      ["cli:ops", "user.renamed", ref],
      ["cli:ops", "user.deleted", ref],
    ]);
  });
  assertFails(
    await cli(db.path, ["user", "delete", "new@b.org"]),
    1,
    'keygate admin: No user "new@b.org"',
  );
});

Deno.test("[cli] --log writes the change as one JSON line on standard error", async () => {
  using db = tempDbPath();
  await addUser(db.path, "log@b.org");
  const result = await cli(db.path, ["user", "disable", "log@b.org", "--log"]);
  assert.equal(result.code, 0);
  assert.equal(result.out, "Disabled log@b.org; 0 live token(s) revoked\n");
  const entry = JSON.parse(result.err);
  assert.equal(entry.event, "admin_change");
  assert.equal(entry.action, "user.disabled");
  assert.equal(entry.actor, "cli:ops");
});

Deno.test("[cli] db backup and db restore bring the database back; restore refuses to clobber", async () => {
  using db = tempDbPath();
  await addUser(db.path, "keep@b.org");
  const backup = `${db.dir}/backup.sqlite3`;
  assert.equal((await cli(db.path, ["db", "backup", backup])).code, 0);
  await cli(db.path, ["user", "delete", "keep@b.org"]);
  assert.equal(await db.withStore(async (s) => (await s.listUsers()).length), 0);

  assertFails(
    await cli(db.path, ["db", "restore", backup]),
    1,
    `keygate admin: Refusing to replace the database "${db.path}": stop the server, then ` +
      "run again with --replace (everything written since the backup is lost)",
  );
  assertFails(
    await cli(db.path, ["db", "restore", `${db.dir}/nope`]),
    1,
    `keygate admin: No backup file "${db.dir}/nope"`,
  );
  const restored = await cli(db.path, ["db", "restore", backup, "--replace"]);
  assert.equal(restored.code, 0, restored.err);
  assert.equal(
    restored.out,
    `Restored ${db.path} from ${backup}: 1 user(s), 0 API key(s), 0 token row(s)\n`,
  );
  await db.withStore(async (store) => {
    assert.deepEqual((await store.listUsers()).map((u) => u.email), ["keep@b.org"]);
    assert.equal((await store.listAudit()).at(-1)!.action, "db.restored");
  });
  const fresh = `${db.dir}/fresh/keygate.sqlite3`;
  assert.equal((await cli(fresh, ["db", "restore", backup])).code, 0);
  assert.equal(await withSqliteStore(fresh, async (s) => (await s.listUsers()).length), 1);
});

Deno.test("[cli] token list shows an expiry beyond a Date's range as the latest Date", async () => {
  using db = tempDbPath();
  await addUser(db.path, "far@b.org");
  await db.withStore(async (store) => {
    const user = (await store.findUserByEmail("far@b.org"))!;
    const key = await store.insertApiKey(
      { userId: user.id, keyHash: hashSecret("k"), prefix: "k", label: "" },
      { now: 0, audit: undefined },
    );
    await addTestToken(store, {
      userId: user.id,
      apiKeyId: key.id,
      issuedAt: Date.now(),
      expiresAt: Date.now() + 3_600_000,
    });
  });
  await querySqlAt(db.path, "UPDATE tokens SET expires_at = 9000000000000000000");
  const listed = await cli(db.path, ["token", "list", "far@b.org", "--json"]);
  assert.equal(listed.code, 0, listed.err);
  const [row] = JSON.parse(listed.out);
  assert.deepEqual([row.expires_at, row.status], ["+275760-09-13T00:00:00.000Z", "live"]);
});

Deno.test("[cli] db migrate prints the e-mail migration's warning on stderr, without the addresses", async () => {
  using db = tempDbPath();
  writePreNfcDatabase(db.path);
  const result = await cli(db.path, ["db", "migrate"]);
  assert.equal(result.code, 0, result.err);
  assert.equal(result.out, "Schema is up to date (3 user(s))\n");
  assert.equal(result.err, `keygate admin: warning: ${describeSkippedEmails(1)}\n`);
  assert.deepEqual(
    await db.withStore(async (s) => (await s.listUsers()).map((u) => u.email).sort()),
    ["caf\u00e9@b.org", "cafe\u0301@b.org", "\u00e9mile@b.org"].sort(),
  );
});
