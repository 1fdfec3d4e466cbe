/** The admin CLI's database commands (backup, check) and how it is told which store to open. */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { runAdmin } from "../../_helpers/admin_cli.ts";
import { main as adminMain } from "../../../src/cli/main.ts";
import { hashSecret } from "../../../src/auth/credentials.ts";
import { createFakeClock } from "../../_helpers/fake_clock.ts";
import { addTestToken } from "../../_helpers/store.ts";
import { tempDbPath, withSqliteStore } from "../../_helpers/temp_db.ts";

/** Runs the admin CLI in-process against `dbPath`, capturing its output. */
function admin(dbPath: string, args: string[], password = "s3cret pw") {
  return runAdmin(dbPath, args, { password });
}

Deno.test("admin db backup writes a copy that opens and validates existing tokens", async () => {
  using db = tempDbPath();
  assert.equal((await admin(db.path, ["user", "add", "a@b.org"])).code, 0);
  const apiKey = (await admin(db.path, ["key", "create", "a@b.org"])).lastLine;
  const secret = "t".repeat(40);
  const now = createFakeClock().now();
  const target = `${db.dir}/backup.sqlite3`;
  await db.withStore(async (live) => {
    await addTestToken(live, {
      userId: 1,
      apiKeyId: 1,
      issuedAt: now,
      expiresAt: now + 3600_000,
      secret,
    });
    // The server's connection stays open (and holds a WAL) while the backup runs.
    const result = await admin(db.path, ["db", "backup", target]);
    assert.equal(result.code, 0, result.err);
    assert.equal(
      result.out,
      `Wrote backup ${target}: 1 user(s), 1 API key(s), 1 token row(s); integrity ok`,
    );
  });

  await withSqliteStore(target, async (copy) => {
    const grant = await copy.findTokenGrant({
      tokenHash: hashSecret(secret),
      keyHash: hashSecret(apiKey),
      now,
    });
    assert.equal(grant?.email, "a@b.org");
    assert.equal(grant?.expiresAt, now + 3600_000);
    assert.deepEqual(copy.sqlite.checkDatabaseIntegrity(), []);
  });

  const again = await admin(db.path, ["db", "backup", target]);
  assert.equal(again.code, 1);
  assert.equal(again.err, `keygate admin: Cannot write backup: "${target}" already exists`);
  assert.equal((await admin(db.path, ["db", "backup"])).code, 2);
});

Deno.test("admin db check passes a sound database and fails a damaged one", async () => {
  using db = tempDbPath();
  assert.equal((await admin(db.path, ["user", "add", "a@b.org"])).code, 0);
  const ok = await admin(db.path, ["db", "check"]);
  assert.equal(ok.code, 0, ok.err);
  assert.equal(ok.out, "Integrity check: ok");

  // Damage the file: overwrite the users table's page (page 2) with junk.
  const path = `${db.dir}/damaged.sqlite3`;
  assert.equal((await admin(db.path, ["db", "backup", path])).code, 0);
  const bytes = Deno.readFileSync(path);
  const pageSize = (bytes[16] << 8) | bytes[17];
  bytes.fill(0x5a, pageSize + 8, pageSize * 2);
  Deno.writeFileSync(path, bytes);
  const bad = await admin(path, ["db", "check"]);
  assert.equal(bad.code, 1);
  assert.match(bad.err, /^keygate admin: Integrity check failed: \d+ problem\(s\)$/);
  assert.match(bad.out, /Tree 2 page 2/);
});

Deno.test("admin --store and --db together are a usage error; the URL's password is never shown", async () => {
  const err: string[] = [];
  const run = (args: string[], env: Record<string, string> = {}) =>
    adminMain(args, {
      env,
      stdout: () => {},
      stderr: (text) => err.push(text),
      readPassword: () => Promise.resolve("pw"),
    });
  const url = "postgres://kg:hunter2@127.0.0.1:1/keygate";
  assert.equal(await run(["user", "list", "--store", url, "--db", "x.sqlite3"]), 2);
  assert.equal(await run(["user", "list", "--db", "x.sqlite3"], { KEYGATE_STORE: url }), 2);
  assert.equal(await run(["user", "list", "--store", `${url}?sslmode=prefer`]), 2);
  assert.match(err.join("\n"), /Give --store or --db, not both/);
  assert.match(err.join("\n"), /sslmode "prefer"/);
  assert.ok(!err.join("\n").includes("hunter2"));
});

Deno.test("admin: store settings say where they came from; a URL-like --db or --store is refused without its password (issue 29)", async () => {
  const err: string[] = [];
  const run = (args: string[], env: Record<string, string> = {}) =>
    adminMain(args, {
      env,
      stdout: () => {},
      stderr: (text) => err.push(text),
      readPassword: () => Promise.resolve("pw"),
    });
  const url = "postgres://kg:hunter2@127.0.0.1:1/keygate";
  const cases: [string[], Record<string, string>, string][] = [
    [
      ["user", "list", "--db", "x.sqlite3"],
      { KEYGATE_STORE: url },
      "Give --store or --db, not both (KEYGATE_STORE is set in the environment; " +
      "--db is on the command line) (see deno task admin help)",
    ],
    [
      ["user", "list", "--store", url],
      { KEYGATE_DB: "x.sqlite3" },
      "Give --store or --db, not both (--store is on the command line; " +
      "KEYGATE_DB is set in the environment) (see deno task admin help)",
    ],
    [
      ["user", "list", "--store", "postgres//kg:hunter2@127.0.0.1:1/keygate"],
      {},
      'Invalid --store "postgres//kg:***@127.0.0.1:1/keygate": it looks like a postgres:// URL ' +
      'with its ":" missing; expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, ' +
      "sqlite:PATH or a file path",
    ],
    [
      ["user", "add", "a@example.org"],
      { KEYGATE_STORE: "postgress://kg:hunter2@db/keygate" },
      'Invalid KEYGATE_STORE "postgress://kg:***@db/keygate": it is a URL (postgress://) of a ' +
      "kind keygate does not know; expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, " +
      "sqlite:PATH or a file path",
    ],
    [
      ["user", "add", "a@example.org"],
      { KEYGATE_DB: url },
      `Invalid KEYGATE_DB "postgres://kg:***@127.0.0.1:1/keygate": it is a store URL: give it ` +
      "with --store (--db takes a file path)",
    ],
    [
      ["user", "list", "--stor", url],
      {},
      'Unknown option "--stor" (see deno task admin help)',
    ],
  ];
  for (const [args, env, message] of cases) {
    err.length = 0;
    assert.equal(await run(args, env), 2, args.join(" "));
    assert.deepEqual(err, [`keygate admin: ${message}`]);
  }
  // A flag with its variable empty is no conflict: KEYGATE_STORE= deno task admin … --db FILE.
  err.length = 0;
  using db = tempDbPath();
  assert.equal(await run(["user", "list", "--db", db.path], { KEYGATE_STORE: "" }), 1);
  assert.match(err.join("\n"), /No database at/);
  assert.ok(!existsSync("postgres"), "no directory named after a mistyped URL");
});
