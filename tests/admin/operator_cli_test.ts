/**
 * `keygate admin operator create|list|revoke`: the token is printed once and
 * stored as a digest; changes are audited; the API accepts the token until
 * it is revoked.
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { createOperatorAuth } from "../../src/auth/operators.ts";
import { openSqliteStore } from "../../src/store/sqlite/sqlite_store.ts";
import { runAdmin } from "../_helpers/admin_cli.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import { tempDbPath } from "../_helpers/temp_db.ts";

/** A new, empty database file. */
async function newDatabase() {
  const db = tempDbPath();
  await openSqliteStore(db.path).closeStore();
  return db;
}

function admin(dbPath: string, args: string[]) {
  return runAdmin(dbPath, args, { env: { USER: "root" } });
}

Deno.test("admin operator create prints the token once and stores only its digest", async () => {
  const db = await newDatabase();
  try {
    const created = await admin(db.path, ["operator", "create", "Ann", "--role", "write"]);
    assert.equal(created.code, 0, created.err);
    assert.match(
      created.out,
      /^Created operator ann \(role write\)\. Its token is shown only this once:\n/,
    );
    const token = created.lastLine;
    assert.match(token, /^kgo_[a-z0-9]{40}$/);
    assert.equal(created.err.includes(token), false, "the change log never holds the token");
    const store = openSqliteStore(db.path);
    try {
      const found = await store.findOperatorByHash(hashSecret(token));
      assert.deepEqual([found?.name, found?.role, found?.prefix], [
        "ann",
        "write",
        token.slice(0, 8),
      ]);
      const [row] = await store.listAudit();
      assert.deepEqual([row.actor, row.action, row.subject], [
        "cli:root",
        "operator.created",
        "operator:ann",
      ]);
      const auth = createOperatorAuth({ store, clock: createFakeClock() });
      assert.equal((await auth.authenticate(`Bearer ${token}`, "127.0.0.1")).name, "ann");
    } finally {
      await store.closeStore();
    }

    const listed = await admin(db.path, ["operator", "list", "--json"]);
    const [op] = JSON.parse(listed.out);
    assert.deepEqual({ ...op, created_at: "" }, {
      name: "ann",
      role: "write",
      token: `${token.slice(0, 8)}…`,
      status: "active",
      created_at: "",
      revoked_at: null,
    });
    assert.equal(listed.out.includes(token), false);

    const again = await admin(db.path, ["operator", "create", "ann", "--role", "read"]);
    assert.equal(again.code, 1);
    assert.match(again.err, /Operator "ann" already exists/);
  } finally {
    db.cleanup();
  }
});

Deno.test("admin operator revoke ends the token; the name is never used again", async () => {
  const db = await newDatabase();
  try {
    const token = (await admin(db.path, ["operator", "create", "bob", "--role", "read"])).lastLine;
    const revoked = await admin(db.path, ["operator", "revoke", "bob"]);
    assert.equal(revoked.code, 0, revoked.err);
    assert.equal(revoked.out, "Revoked operator bob");
    const store = openSqliteStore(db.path);
    try {
      const auth = createOperatorAuth({ store, clock: createFakeClock() });
      await assert.rejects(auth.authenticate(`Bearer ${token}`, "127.0.0.1"), {
        code: "invalid_token",
      });
    } finally {
      await store.closeStore();
    }
    assert.equal((await admin(db.path, ["operator", "revoke", "bob"])).code, 1);
    const badName = await admin(db.path, ["operator", "revoke", "a b"]);
    assert.equal(badName.code, 2);
    assert.match(badName.err, /^keygate admin: Invalid operator name "a b": expected 1 to 64/);
    const reused = await admin(db.path, ["operator", "create", "BOB", "--role", "write"]);
    assert.equal(reused.code, 1);
    assert.equal(
      reused.err,
      'keygate admin: Operator "bob" was revoked: a name is never used again (the audit log ' +
        "names operators by it), choose another",
    );
    const listed = await admin(db.path, ["operator", "list", "--json"]);
    assert.equal(JSON.parse(listed.out).length, 1, "nothing was created");
  } finally {
    db.cleanup();
  }
});

Deno.test("admin operator create refuses a bad name, a bad role and a missing role", async () => {
  const db = await newDatabase();
  try {
    const badRole = await admin(db.path, ["operator", "create", "ann", "--role", "root"]);
    assert.notEqual(badRole.code, 0);
    assert.match(badRole.err, /Invalid role "root": expected "read" or "write"/);
    const badName = await admin(db.path, ["operator", "create", "a b", "--role", "read"]);
    assert.equal(badName.code, 2);
    assert.match(badName.err, /Invalid operator name "a b"/);
    const noRole = await admin(db.path, ["operator", "create", "ann"]);
    assert.equal(noRole.code, 2);
    assert.match(noRole.err, /Missing --role read\|write/);
    const wrongOption = await admin(db.path, ["operator", "list", "--role", "read"]);
    assert.equal(wrongOption.code, 2);
    const store = openSqliteStore(db.path);
    assert.deepEqual(await store.listOperators(), []);
    await store.closeStore();
  } finally {
    db.cleanup();
  }
});
