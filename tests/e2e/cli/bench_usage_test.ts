/**
 * `deno task bench`'s usage mistakes as an engineer types them (docs/performance.md,
 * "Methodology"): each is one line on standard error and exit 2, before the bench needs wrk or
 * starts anything, and `--help` prints the usage. The bench itself runs only by hand: its
 * results depend on an idle machine.
 *
 * @module
 */
import assert from "node:assert/strict";
import { runTask } from "../../_helpers/task.ts";

/** Mistakes and what the one line must say. */
const MISTAKES: [string[], RegExp][] = [
  [["--bogus"], /^bench: Unknown option '--bogus'.*--help prints the usage\)$/],
  [["--duration"], /^bench: Option '--duration <value>' argument missing/],
  // Node's message for this one is three lines, the last the remedy: all of it, on one line.
  [
    ["--mix-a-flags", "--cpu-prof"],
    /^bench: Option '--mix-a-flags' argument is ambiguous\. .*'--mix-a-flags=-XYZ'/,
  ],
  [["--duration", "0"], /^bench: --duration: "0": expected a positive whole number$/],
  [["--tokens", "1e6"], /^bench: --tokens: "1e6": expected a positive whole number$/],
  [["--only", "nope"], /^bench: --only: unknown section "nope" \(secure, /],
  [["--mix-rates", "0,10,10"], /^bench: --mix-rates: "0,10,10": expected distinct whole numbers/],
  [["--mix-limit-rates", "5"], /^bench: --mix-limit-rates: 5 is not among the production mix's/],
  [["--mix-limit-headers", "maybe"], /^bench: --mix-limit-headers: "maybe": expected on or off$/],
  [
    ["--mix-control-rates", "0"],
    /^bench: --mix-control-rates: 0: a control row needs revocations to send elsewhere$/,
  ],
  [
    ["--mix-rates", "0,100", "--mix-control-rates", "10"],
    /^bench: --mix-control-rates: 10 is not among the production mix's rates \(0,100\): a control row needs its row with A following$/,
  ],
  [["--mix-control-rates", "ten"], /^bench: --mix-control-rates: "ten": expected distinct whole/],
];

Deno.test("[cli] deno task bench: each usage mistake is one line and exit 2, with nothing started", async () => {
  for (const [args, said] of MISTAKES) {
    const run = await runTask("bench", args);
    const lines = run.err.trimEnd().split("\n");
    assert.equal(run.code, 2, `${args.join(" ")}: ${run.err}`);
    assert.equal(lines.length, 1, `${args.join(" ")}: one line, got ${run.err}`);
    assert.match(lines[0], said);
    assert.equal(run.out, "", `${args.join(" ")}: nothing on standard output`);
  }
});

Deno.test("[cli] deno task bench --help: the usage, with every production-mix flag, exit 0", async () => {
  const run = await runTask("bench", ["--help"]);
  assert.equal(run.code, 0, run.err);
  assert.match(run.out, /^Usage: deno task bench /);
  for (const flag of ["--mix-rates", "--mix-limit-rates", "--mix-control-rates", "--mix-a-flags"]) {
    assert.ok(run.out.includes(flag), flag);
  }
});
