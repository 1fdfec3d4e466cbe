/**
 * `deno task timing` as an operator runs it (docs/security.md): the task prints each case's
 * medians and the gaps, and the portal's answers for known and unknown addresses must be
 * identical. The gaps themselves depend on the machine (a loaded CI runner can exceed 5 ms), so
 * this test holds the parts that do not: the task runs to its verdict, the answers are identical,
 * the exit code agrees with the verdicts printed, and a usage mistake is one line and exit 2.
 * When the suite runs on PostgreSQL (`KEYGATE_TEST_STORE=postgres`), the task runs once more
 * with `--store` on a new database of the tests' cluster, and refuses one that holds users.
 *
 * @module
 */
import assert from "node:assert/strict";
import { openTestStore, TEST_STORE_NAME } from "../../_helpers/store.ts";
import { runTask, type TaskRun } from "../../_helpers/task.ts";

/** Asserts the verdict lines of a run with `--requests 4`, and an exit code that matches them. */
function assertVerdicts(run: TaskRun) {
  assert.doesNotMatch(run.err, /error/i, run.err);
  for (const name of ["wrong password", "unknown e-mail", "disabled user", "revoked key"]) {
    assert.match(run.out, new RegExp(`^${name} +\\d+ +\\d+\\.\\d\\d +\\d+\\.\\d\\d$`, "m"));
  }
  assert.match(
    run.out,
    /^median gap, unknown e-mail vs wrong password, over 4 interleaved requests: \d+\.\d{3} ms \(limit 5 ms\): (ok|TOO LARGE)$/m,
  );
  for (const flow of ["signup", "signin", "forgot", "verify"]) {
    for (const state of ["active", "pending", "operator", "unknown"]) {
      assert.match(run.out, new RegExp(`^${flow} ${state} +4 +\\d+\\.\\d\\d$`, "m"));
    }
    assert.match(run.out, new RegExp(`^answers, ${flow}: identical$`, "m"));
  }
  const failed = /TOO LARGE|FAILED|DIFFER/.test(run.out);
  assert.equal(run.code, failed ? 1 : 0, run.out);
}

Deno.test("[cli] deno task timing --requests 4: every case measured, identical answers, an exit code that matches its verdicts", async () => {
  const run = await runTask("timing", ["--requests", "4"], { timeoutMs: 120_000 });
  assert.match(run.out, /^store: SQLite, a temporary file$/m);
  assertVerdicts(run);
});

Deno.test({
  name:
    "[cli] deno task timing --store postgres://…: both parts on PostgreSQL; a database with users is refused",
  // The same task on SQLite is the test above; this one needs the suite's PostgreSQL cluster.
  ignore: TEST_STORE_NAME !== "postgres",
  async fn() {
    // The command docs/security.md shows, on the cluster's database instead of its example's.
    const docs = await Deno.readTextFile(new URL("../../../docs/security.md", import.meta.url));
    assert.match(docs, /^ {2}deno task timing --requests 200 --store postgres:\/\/\S+$/m);
    await using db = await openTestStore();
    const url = db.path;
    assert.match(url, /^postgres:\/\//);
    const run = await runTask("timing", ["--requests", "4", "--store", url], {
      timeoutMs: 300_000,
    });
    assert.match(run.out, /^store: PostgreSQL, postgres:\/\/.*$/m);
    assertVerdicts(run);
    // It measured on that database: the accounts it seeded are there.
    const known = await db.store.findUserByEmail("known@example.org");
    assert.ok(known !== undefined, "seeded on PostgreSQL");
    assert.equal((await db.store.findPortalAccount(known.id))?.state, "active");
    assert.ok(await db.store.findUserByEmail("alice@example.org"), "the token part too");

    // Now it holds users: a second run refuses it before writing anything.
    const users = await db.store.countRows("users");
    const again = await runTask("timing", ["--requests", "2", "--store", url]);
    assert.equal(again.code, 2);
    assert.equal(again.out, "");
    assert.match(
      again.err.trim(),
      new RegExp(`^timing: --store must name an empty database \\(.* has ${users} users\\): `),
    );
    assert.equal(again.err.trim().split("\n").length, 1);
    assert.equal(await db.store.countRows("users"), users);
  },
});

Deno.test("[cli] deno task timing --requests 1 is a usage mistake: one line, exit 2", async () => {
  const run = await runTask("timing", ["--requests", "1"]);
  assert.equal(run.code, 2);
  assert.equal(run.out, "");
  assert.equal(run.err.trim(), "timing: --requests must be a whole number of at least 2");
});

Deno.test("[cli] deno task timing: a --store that is not a PostgreSQL URL, or an unknown flag, is one line, exit 2", async () => {
  const cases: [string[], RegExp][] = [
    [["--store", "sqlite:/tmp/x.sqlite3"], /^timing: --store takes a postgres:\/\/ URL /],
    [["--store", "postgres://kg:hunter2@db:notaport/kg"], /^timing: --store: /],
    [["--bogus"], /^timing: .*bogus/],
  ];
  for (const [args, message] of cases) {
    const run = await runTask("timing", args);
    assert.equal(run.code, 2, args.join(" "));
    assert.equal(run.out, "");
    assert.equal(run.err.trim().split("\n").length, 1, run.err);
    assert.match(run.err.trim(), message);
    assert.doesNotMatch(run.err, /hunter2/, "never the password");
  }
});
