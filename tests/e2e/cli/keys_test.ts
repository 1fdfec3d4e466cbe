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
