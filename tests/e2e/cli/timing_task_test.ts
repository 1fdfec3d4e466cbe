/**
 * `deno task timing` as an operator runs it (docs/security.md): the task prints each case's
 * medians and the gaps, and the portal's answers for known and unknown addresses must be
 * identical. The gaps themselves depend on the machine (a loaded CI runner can exceed 5 ms), so
 * this test holds the parts that do not: the task runs to its verdict, the answers are identical,
 * the exit code agrees with the verdicts printed, and a usage mistake is one line and exit 2.
 *
 * @module
 */
import assert from "node:assert/strict";
import { runTask } from "../../_helpers/task.ts";

Deno.test("[cli] deno task timing --requests 4: every case measured, identical answers, an exit code that matches its verdicts", async () => {
  const run = await runTask("timing", ["--requests", "4"], { timeoutMs: 120_000 });
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
});

Deno.test("[cli] deno task timing --requests 1 is a usage mistake: one line, exit 2", async () => {
  const run = await runTask("timing", ["--requests", "1"]);
  assert.equal(run.code, 2);
  assert.equal(run.out, "");
  assert.equal(run.err.trim(), "timing: --requests must be a whole number of at least 2");
});
