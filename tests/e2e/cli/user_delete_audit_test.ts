/**
 * `deno task admin user delete` as an operator types it, on the backend `KEYGATE_TEST_STORE`
 * names: the audit log keeps the user's history under an opaque id, never its e-mail, as every
 * deletion of a user does (src/auth/user_anonymity.ts).
 */
import assert from "node:assert/strict";
import { runAdminProcess as cli } from "../../_helpers/admin_cli.ts";
import { openTestStore } from "../../_helpers/store.ts";

const PASSWORD = "a good password\n";

Deno.test("[cli] deno task admin user delete leaves an opaque id in the audit log, never the e-mail", async () => {
  await using t = await openTestStore();
  for (
    const args of [
      ["user", "add", "first@example.org"],
      ["user", "add", "kept@example.org"],
      ["user", "rename", "first@example.org", "second@example.org"],
      ["key", "create", "second@example.org"],
    ]
  ) {
    const run = await cli(t.path, args, PASSWORD);
    assert.equal(run.code, 0, `${args.join(" ")}: ${run.err}`);
  }
  const user = (await t.store.findUserByEmail("second@example.org"))!;
  const keptBefore = (await t.store.listAudit()).filter((row) =>
    JSON.stringify(row).includes("kept@example.org")
  );

  const deleted = await cli(t.path, ["user", "delete", "second@example.org"]);
  assert.equal(deleted.code, 0, deleted.err);
  assert.equal(
    deleted.out,
    `Deleted user second@example.org (id ${user.id}) with 1 API key(s) and 0 token row(s)\n`,
  );

  assert.equal(await t.store.findUserById(user.id), undefined);
  const audit = await t.store.listAudit();
  for (const address of ["first@example.org", "second@example.org"]) {
    assert.deepEqual(audit.filter((row) => JSON.stringify(row).includes(address)), [], address);
  }
  const last = audit.at(-1)!;
  assert.equal(last.action, "user.deleted");
  assert.equal(last.actor, "cli:ops");
  assert.match(last.subject, /^user:deleted:[A-Za-z0-9_-]{16}$/);
  const ref = last.subject;
  assert.deepEqual(last.detail, {
    user_id: user.id,
    api_keys_deleted: 1,
    tokens_deleted: 0,
    audit_rows_anonymized: 2,
  });
  // The user's added and renamed rows took the id; its key's row names it in the detail.
  assert.deepEqual(
    audit.filter((row) => JSON.stringify(row).includes(ref)).map((row) => [
      row.action,
      row.subject === ref ? "ref" : row.subject.replace(/\d+$/, "N"),
      row.action === "key.created" ? row.detail.user : undefined,
    ]),
    [
      ["user.added", "ref", undefined],
      ["user.renamed", "ref", undefined],
      ["key.created", "api_key:N", ref],
      ["user.deleted", "ref", undefined],
    ],
  );
  // Another user's rows stay as they were.
  assert.deepEqual(
    audit.filter((row) => JSON.stringify(row).includes("kept@example.org")),
    keptBefore,
  );
});
