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
import { type AdminProcessRun as Run, runAdminProcess as cli } from "../../_helpers/admin_cli.ts";

function assertFails(result: Run, code: 1 | 2, line: string | RegExp): void {
  assert.equal(result.code, code, result.err);
  assert.equal(result.out, "");
  const lines = result.err.split("\n");
  assert.equal(lines.length, 2, `one line: ${result.err}`);
  if (typeof line === "string") assert.equal(lines[0], line);
  else assert.match(lines[0], line);
}

async function addUser(path: string, email: string): Promise<void> {
  const added = await cli(path, ["user", "add", email], "a good password\n");
  assert.equal(added.code, 0, added.err);
}

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

Deno.test("[cli] key references: id, unambiguous prefix (saying which), whole key", async () => {
  using db = tempDbPath();
  await addUser(db.path, "k@b.org");
  const created = await cli(db.path, ["key", "create", "k@b.org", "--json"]);
  assert.equal(created.code, 0, created.err);
  const first = JSON.parse(created.out);
  assert.deepEqual(Object.keys(first), [
    "id",
    "key",
    "email",
    "label",
    "introspect",
    "expires_at",
  ]);
  assert.equal(first.id, 1);
  assert.ok(await db.withStore((s) => s.findApiKeyByHash(hashSecret(first.key))));
  const second = JSON.parse((await cli(db.path, ["key", "create", "k@b.org", "--json"])).out);

  const listed = (await cli(db.path, ["key", "list"])).out;
  const prefix = first.key.slice(0, 8);
  assert.ok(listed.includes(`${prefix}…`));
  const byPrefix = await cli(db.path, ["key", "disable", `${prefix}…`]);
  assert.equal(byPrefix.code, 0, byPrefix.err);
  assert.equal(byPrefix.out, `API key 1 (prefix ${prefix}) disabled\n`);
  assert.notEqual(
    await db.withStore(async (s) => (await s.findApiKeyById(1))!.disabledAt),
    null,
  );
  assert.equal(
    await db.withStore(async (s) => (await s.findApiKeyById(2))!.disabledAt),
    null,
  );

  const byId = await cli(db.path, ["key", "enable", "1"]);
  assert.equal(byId.out, "API key 1 enabled\n");
  const whole = await cli(db.path, ["key", "revoke", second.key.toUpperCase()]);
  assert.equal(whole.out, "Revoked API key 2; 0 live token(s) revoked\n");
  assert.notEqual(
    await db.withStore(async (s) => (await s.findApiKeyById(2))!.revokedAt),
    null,
  );

  assertFails(
    await cli(db.path, ["key", "disable", "2"]),
    1,
    "keygate admin: API key 2 is revoked",
  );
  assertFails(
    await cli(db.path, ["key", "create", "k@b.org", "--label", "x".repeat(201)]),
    2,
    "keygate admin: Label too long: at most 200 characters",
  );
  assert.equal(await db.withStore(async (s) => (await s.listApiKeys()).length), 2);
  assertFails(
    await cli(db.path, ["key", "revoke", "abc"]),
    2,
    'keygate admin: Key prefix "abc" is too short: give at least 4 characters or the id',
  );
  assertFails(
    await cli(db.path, ["key", "disable", "a…"]),
    2,
    'keygate admin: Key prefix "a…" is too short: give at least 4 characters or the id',
  );
  for (const reference of ["zz!x", "key-1", "12 34"]) {
    assertFails(
      await cli(db.path, ["key", "revoke", reference]),
      2,
      `keygate admin: Invalid KEY "${reference}": expected a key id, a key prefix ` +
        "(at least 4 of 0-9, a-f and -) or a whole key",
    );
  }
  assertFails(
    await cli(db.path, ["key", "revoke", "123"]),
    1,
    /^keygate admin: No API key "123": expected a key id/,
  );
  assertFails(
    await cli(db.path, ["key", "revoke", "ffffffff"]),
    1,
    /^keygate admin: No API key "ffffffff": expected a key id, a key prefix or a whole key/,
  );
});

Deno.test("[cli] an ambiguous key prefix names the keys it matches and changes nothing", async () => {
  using db = tempDbPath();
  await db.withStore(async (store) => {
    const user = await store.insertUser(
      { email: "amb@b.org", passwordHash: "x", tokenTimeoutSeconds: null },
      { now: 0, audit: undefined },
    );
    for (
      const key of ["abcd1111-0000-4000-8000-000000000001", "abcd2222-0000-4000-8000-000000000002"]
    ) {
      await store.insertApiKey({
        userId: user.id,
        keyHash: hashSecret(key),
        prefix: key.slice(0, 8),
        label: "",
        expiresAt: null,
        introspect: false,
      }, { now: 0, audit: undefined });
    }
  });
  const result = await cli(db.path, ["key", "revoke", "abcd"]);
  assertFails(
    result,
    1,
    'keygate admin: Ambiguous key "abcd": it matches API keys 1, 2; give the numeric id or ' +
      "more of the key",
  );
  assert.ok(
    await db.withStore(
      async (s) => (await s.listApiKeys()).every((k) => k.revokedAt === null),
    ),
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
    const audit = (await store.listAudit()).map((a) => [a.actor, a.action, a.subject]);
    assert.deepEqual(audit.slice(-2), [
      ["cli:ops", "user.renamed", "user:new@b.org"],
      ["cli:ops", "user.deleted", "user:new@b.org"],
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
