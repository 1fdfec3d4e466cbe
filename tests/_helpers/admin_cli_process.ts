/** Checks of the admin CLI run as a process: one-line failures, and a user added by the CLI. */
import assert from "node:assert/strict";
// The CLI as a child process: `cli(dbPath, args, stdin)`.
import { type AdminProcessRun as Run, runAdminProcess as cli } from "./admin_cli.ts";

export function assertFails(result: Run, code: 1 | 2, line: string | RegExp): void {
  assert.equal(result.code, code, result.err);
  assert.equal(result.out, "");
  const lines = result.err.split("\n");
  assert.equal(lines.length, 2, `one line: ${result.err}`);
  if (typeof line === "string") assert.equal(lines[0], line);
  else assert.match(lines[0], line);
}

export async function addUser(path: string, email: string): Promise<void> {
  const added = await cli(path, ["user", "add", email], "a good password\n");
  assert.equal(added.code, 0, added.err);
}
