import assert from "node:assert/strict";
import { runAdmin, runAdminProcess } from "../../_helpers/admin_cli.ts";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { createPasswordHasher } from "../../../src/passwords/passwords.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { addTestToken } from "../../_helpers/store.ts";
import { tempDbPath } from "../../_helpers/temp_db.ts";

const hasher = createPasswordHasher();

/** Runs the admin CLI in-process against `dbPath`, capturing its output. */
function admin(dbPath: string, args: string[], password = "s3cret pw") {
  return runAdmin(dbPath, args, { password });
}

Deno.test("admin user add stores a lower-cased user with an argon2id hash", async () => {
  using db = tempDbPath();
  const result = await admin(db.path, ["user", "add", "Alice@Example.org", "--timeout", "2h"]);
  assert.equal(result.code, 0, result.err);
  assert.match(result.out, /Added user alice@example.org \(id 1, token timeout 2h\)/);
  const user = (await db.withStore((store) => store.findUserByEmail("alice@example.org")))!;
  assert.equal(user.tokenTimeoutSeconds, 7200);
  assert.match(user.passwordHash, /^\$argon2id\$/);
  assert.equal(await hasher.verify(user.passwordHash, "s3cret pw"), true);
  const again = await admin(db.path, ["user", "add", "alice@example.org"]);
  assert.equal(again.code, 1);
  assert.equal(again.err, 'keygate admin: User "alice@example.org" already exists');
});

Deno.test("admin user list, set-timeout, disable and enable", async () => {
  using db = tempDbPath();
  await admin(db.path, ["user", "add", "a@b.org"]);
  assert.equal((await admin(db.path, ["user", "set-timeout", "a@b.org", "15m"])).code, 0);
  let [row] = JSON.parse((await admin(db.path, ["user", "list", "--json"])).out);
  assert.deepEqual({ ...row, created_at: "" }, {
    id: 1,
    email: "a@b.org",
    token_timeout: "15m",
    status: "enabled",
    created_at: "",
  });
  await admin(db.path, ["user", "set-timeout", "a@b.org", "default"]);
  assert.equal((await admin(db.path, ["user", "disable", "A@B.org"])).code, 0);
  [row] = JSON.parse((await admin(db.path, ["user", "list", "--json"])).out);
  assert.equal(row.token_timeout, "default");
  assert.equal(row.status, "disabled");
  await admin(db.path, ["user", "enable", "a@b.org"]);
  const table = (await admin(db.path, ["user", "list"])).out;
  assert.match(
    table,
    /^ID\s+EMAIL\s+TOKEN_TIMEOUT\s+STATUS\s+CREATED_AT\n1\s+a@b.org\s+default\s+enabled/,
  );
});

Deno.test("admin key create prints the key alone on the last line and stores only its hash", async () => {
  using db = tempDbPath();
  await admin(db.path, ["user", "add", "a@b.org"]);
  const created = await admin(db.path, ["key", "create", "a@b.org", "--label", "ci"]);
  assert.equal(created.code, 0, created.err);
  assert.match(
    created.lastLine,
    /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  );
  const key =
    (await db.withStore((store) => store.findApiKeyByHash(hashSecret(created.lastLine))))!;
  assert.equal(key.label, "ci");
  const listed = await admin(db.path, ["key", "list", "a@b.org", "--json"]);
  assert.ok(!listed.out.includes(created.lastLine));
  assert.deepEqual(
    JSON.parse(listed.out).map((
      k: { key: string; label: string; status: string },
    ) => [k.key, k.label, k.status]),
    [
      [`${created.lastLine.slice(0, 8)}…`, "ci", "active"],
    ],
  );
});

Deno.test("admin key revoke takes the key or its id", async () => {
  using db = tempDbPath();
  await admin(db.path, ["user", "add", "a@b.org"]);
  const first = (await admin(db.path, ["key", "create", "a@b.org"])).lastLine;
  await admin(db.path, ["key", "create", "a@b.org"]);
  assert.match(
    (await admin(db.path, ["key", "revoke", first.toUpperCase()])).out,
    /Revoked API key 1/,
  );
  assert.match((await admin(db.path, ["key", "revoke", "2"])).out, /Revoked API key 2/);
  assert.match((await admin(db.path, ["key", "revoke", "2"])).out, /already revoked/);
  const missing = await admin(db.path, ["key", "revoke", "99"]);
  assert.equal(missing.code, 1);
  assert.equal(
    missing.err,
    'keygate admin: No API key "99": expected a key id, a key prefix or a whole key ' +
      "(see deno task admin key list)",
  );
  const statuses = JSON.parse((await admin(db.path, ["key", "list", "--json"])).out).map((
    k: { status: string },
  ) => k.status);
  assert.deepEqual(statuses, ["revoked", "revoked"]);
});

Deno.test("admin token revoke-all and purge", async () => {
  using db = tempDbPath();
  await admin(db.path, ["user", "add", "a@b.org"]);
  await admin(db.path, ["key", "create", "a@b.org"]);
  await db.withStore(async (store) => {
    const now = createFakeClock().now();
    for (
      const [t, expiresAt] of [["t1", now + 1000], ["t2", now + 1000], ["old", now - 1]] as const
    ) {
      await addTestToken(store, {
        userId: 1,
        apiKeyId: 1,
        issuedAt: now - 5000,
        expiresAt,
        secret: t,
      });
    }
    assert.match(
      (await admin(db.path, ["token", "revoke-all", "a@b.org"])).out,
      /Revoked 2 live token\(s\) of a@b.org/,
    );
    assert.match(
      (await admin(db.path, ["token", "purge"])).out,
      /Deleted 3 expired or revoked token row\(s\)/,
    );
    assert.equal(await store.countRows("tokens"), 0);
  });
});

Deno.test("admin set-password replaces the hash and revokes the user's tokens", async () => {
  using db = tempDbPath();
  await admin(db.path, ["user", "add", "a@b.org"]);
  await admin(db.path, ["key", "create", "a@b.org"]);
  await db.withStore(async (store) => {
    const now = createFakeClock().now();
    await addTestToken(store, { userId: 1, apiKeyId: 1, issuedAt: now, expiresAt: now + 1000 });
    const result = await admin(db.path, ["user", "set-password", "a@b.org"], "new password");
    assert.match(result.out, /1 live token\(s\) revoked/);
    assert.equal(
      await hasher.verify((await store.findUserByEmail("a@b.org"))!.passwordHash, "new password"),
      true,
    );
  });
});

Deno.test("admin refuses bad input with one line on stderr and a non-zero exit", async () => {
  using db = tempDbPath();
  const cases: [string[], number, RegExp, string?][] = [
    [["user", "frobnicate"], 2, /Unknown command "user frobnicate"/],
    [["user", "add", "not-an-email"], 2, /Invalid e-mail "not-an-email"/],
    [["user", "add", "a@b.org", "--timeout", "10"], 2, /Invalid --timeout "10": expected/],
    [["user", "add", "a@b.org"], 2, /Invalid password/, ""],
    [["user", "list", "--label", "x"], 2, /Option --label does not apply/],
    [["key", "create", "nobody@b.org"], 1, /No user "nobody@b.org"/],
    [["user", "list", "--bogus"], 2, /bogus/],
  ];
  for (const [args, code, message, password] of cases) {
    const result = await admin(db.path, args, password);
    assert.equal(result.code, code, args.join(" "));
    assert.match(result.err, message);
    assert.equal(result.err.split("\n").length, 1);
  }
});

Deno.test("admin --help prints usage and exits 0", async () => {
  using db = tempDbPath();
  const result = await admin(db.path, ["--help"]);
  assert.equal(result.code, 0);
  for (
    const command of [
      "user add",
      "user list",
      "user set-timeout",
      "user set-password",
      "user disable",
      "user enable",
      "key create",
      "key list",
      "key revoke",
      "token revoke-all",
      "token purge",
    ]
  ) {
    assert.ok(result.out.includes(command), command);
  }
  assert.match(
    (await admin(db.path, ["key", "create", "--help"])).out,
    /key create EMAIL \[--label TEXT\]/,
  );
});

Deno.test("admin CLI as a process reads the password from standard input", async () => {
  using db = tempDbPath();
  const run = (args: string[], stdin = "") => runAdminProcess(db.path, args, stdin);
  const added = await run(["user", "add", "p@b.org"], "pass word\nignored second line\n");
  assert.equal(added.code, 0, added.err);
  await db.withStore(async (store) => {
    assert.equal(
      await hasher.verify((await store.findUserByEmail("p@b.org"))!.passwordHash, "pass word"),
      true,
    );
  });
  const failed = await run(["key", "create", "nobody@b.org"]);
  assert.equal(failed.code, 1);
  assert.equal(failed.err, 'keygate admin: No user "nobody@b.org"\n');
});

Deno.test("admin key create --introspect makes a resource-server key, shown in key list", async () => {
  using db = tempDbPath();
  await admin(db.path, ["user", "add", "rs@b.org"]);
  const plain = await admin(db.path, ["key", "create", "rs@b.org"]);
  const created = await admin(db.path, ["key", "create", "rs@b.org", "--introspect"]);
  assert.equal(created.code, 0, created.err);
  assert.match(created.out, /Created resource-server API key \(may introspect tokens\) 2/);
  await db.withStore(async (store) => {
    assert.equal((await store.findApiKeyByHash(hashSecret(created.lastLine)))!.introspect, true);
    assert.equal((await store.findApiKeyByHash(hashSecret(plain.lastLine)))!.introspect, false);
  });
  const listed = JSON.parse((await admin(db.path, ["key", "list", "--json"])).out);
  assert.deepEqual(listed.map((k: { introspect: string }) => k.introspect), ["no", "yes"]);
  const misplaced = await admin(db.path, ["user", "list", "--introspect"]);
  assert.equal(misplaced.code, 2);
  assert.match(misplaced.err, /Option --introspect does not apply to "user list"/);
});

Deno.test("admin logs every change as one JSON audit line, never a secret", async () => {
  using db = tempDbPath();
  const lines: string[] = [];
  const run = async (args: string[]) => {
    const result = await runAdmin(db.path, [...args, "--log"], {
      env: { USER: "ops" },
      password: "canary audit pw",
    });
    lines.push(...result.err.split("\n"));
    return result.code;
  };
  assert.equal(await run(["user", "add", "a@b.org"]), 0);
  assert.equal(await run(["key", "create", "a@b.org"]), 0);
  assert.equal(await run(["user", "list"]), 0, "a listing changes nothing");
  assert.equal(await run(["user", "disable", "a@b.org"]), 0);
  assert.equal(await run(["key", "revoke", "1"]), 0);
  assert.equal(await run(["user", "disable", "nobody@b.org"]), 1);
  const entries = lines.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));
  assert.deepEqual(entries.map((e) => [e.event, e.command, e.action, e.subject]), [
    ["admin_change", "user add", "user.added", "user:a@b.org"],
    ["admin_change", "key create", "key.created", "api_key:1"],
    ["admin_change", "user disable", "user.disabled", "user:a@b.org"],
    ["admin_change", "key revoke", "key.revoked", "api_key:1"],
  ]);
  for (const entry of entries) {
    assert.equal(entry.actor, "cli:ops");
    assert.equal(entry.time, "2026-01-01T00:00:00.000Z");
    assert.equal(entry.db, db.path);
  }
  assert.ok(!lines.join("\n").includes("canary audit pw"));
});
