/** main.ts started as a child process for start-up checks: exit code, outputs, one-line errors. */
import assert from "node:assert/strict";

export const PERMISSIONS = [
  "--allow-net",
  "--allow-read",
  "--allow-write",
  "--allow-env",
  "--allow-ffi",
  "--allow-sys",
];

/** Runs main.ts with `args` (killed on `signal`); returns the exit code and both outputs. */
export async function start(args: string[], signal?: AbortSignal) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...PERMISSIONS, "main.ts", "--hostname", "127.0.0.1", ...args],
    stdout: "piped",
    stderr: "piped",
    signal,
  }).output();
  return {
    code: output.code,
    out: new TextDecoder().decode(output.stdout),
    err: new TextDecoder().decode(output.stderr),
  };
}

export function assertOneLine(err: string, expected: string | RegExp): void {
  assert.ok(err.endsWith("\n") && err.split("\n").length === 2, `one line: ${err}`);
  if (typeof expected === "string") assert.equal(err, `${expected}\n`);
  else assert.match(err.trimEnd(), expected);
  assert.ok(!/\bat |error: Uncaught|Stack/.test(err), err);
}
