import assert from "node:assert/strict";
import {
  createLogger,
  redactTarget,
  toErrorText,
  toLineChunks,
} from "../../src/platform/logger.ts";

Deno.test("createLogger() writes one JSON object a line, and skips lines below its level", () => {
  const lines: string[] = [];
  const logger = createLogger({
    level: "info",
    write: (line) => lines.push(line),
    clock: { now: () => 0 },
  });
  logger.debug("hidden");
  logger.info("shown\nwith a newline", { request_id: "r1", n: 2 });
  assert.equal(logger.enabled("debug"), false);
  assert.equal(logger.enabled("info"), true);
  assert.deepEqual(lines, [
    '{"time":"1970-01-01T00:00:00.000Z","level":"info","msg":"shown\\nwith a newline","request_id":"r1","n":2}',
  ]);
});

Deno.test("redactTarget() hides secret query values, encoded names too", () => {
  const redact = (target: string) => {
    const url = new URL("https://k.test" + target);
    return redactTarget(url.pathname, url.search);
  };
  assert.equal(
    redact("/a?api_key=K&x=1&API_TOKEN=T"),
    "/a?api_key=REDACTED&x=1&API_TOKEN=REDACTED",
  );
  assert.equal(redact("/a?api%5Fkey=K&token=T+U"), "/a?api_key=REDACTED&token=REDACTED");
  // An OAuth client that wrongly puts its secret (an API key) in the URL.
  assert.equal(
    redact("/a?client_id=3&client_secret=S"),
    "/a?client_id=3&client_secret=REDACTED",
  );
  assert.equal(redact("/a"), "/a");
});

Deno.test("the stdout logger survives a closed standard output", async () => {
  const script = `
    import { createLogger } from "${new URL("../../src/platform/logger.ts", import.meta.url)}";
    const logger = createLogger({ level: "info" });
    // Far more than a pipe buffer holds, so some write fails whenever the reader goes away.
    for (let i = 0; i < 5000; i++) logger.info("line " + i);
    logger.flush();
    console.error("still running");
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  await child.stdout.cancel(); // the reader goes away: writes fail with a broken pipe
  const { code, stderr } = await child.output();
  const text = new TextDecoder().decode(stderr);
  assert.equal(code, 0, text);
  assert.match(text, /log line\(s\) lost/);
  assert.match(text, /still running/);
});

Deno.test("createLogger() lines are the same JSON whatever the fields", () => {
  const lines: string[] = [];
  let now = Date.parse("2026-11-22T10:00:00.000Z");
  const logger = createLogger({
    level: "debug",
    write: (l) => lines.push(l),
    clock: { now: () => now },
  });
  logger.info("no fields");
  logger.info("empty", {});
  logger.warn("skipped undefined", { a: undefined, b: null, c: '\u2028"' });
  now += 1;
  logger.error("a field named msg wins", { msg: "from fields", level: "x" });
  assert.deepEqual(lines.map((l) => JSON.parse(l)), [
    { time: "2026-11-22T10:00:00.000Z", level: "info", msg: "no fields" },
    { time: "2026-11-22T10:00:00.000Z", level: "info", msg: "empty" },
    {
      time: "2026-11-22T10:00:00.000Z",
      level: "warn",
      msg: "skipped undefined",
      b: null,
      c: '\u2028"',
    },
    { time: "2026-11-22T10:00:00.001Z", level: "x", msg: "from fields" },
  ]);
});

Deno.test("toLineChunks() cuts a batch at line ends, at most the limit a chunk, a long line alone", () => {
  const text = ["a".repeat(10), "b".repeat(10), "c".repeat(30), "d".repeat(5)].join("\n") + "\n";
  const bytes = new TextEncoder().encode(text);
  const chunks = toLineChunks(bytes, 24);
  const decoded = chunks.map(([start, end]) =>
    new TextDecoder().decode(bytes.subarray(start, end))
  );
  assert.deepEqual(decoded, [
    "a".repeat(10) + "\n" + "b".repeat(10) + "\n",
    "c".repeat(30) + "\n",
    "d".repeat(5) + "\n",
  ]);
  assert.deepEqual(toLineChunks(bytes, Infinity), [[0, bytes.length]]);
  assert.deepEqual(toLineChunks(new Uint8Array(), 24), []);
});

Deno.test("toErrorText() gives an error's message, an error-like value's, else the value as a string", () => {
  assert.equal(toErrorText(new TypeError("bad input")), "bad input");
  assert.equal(toErrorText({ message: "from a worker" }), "from a worker");
  assert.equal(toErrorText({ message: 42 }), "42");
  assert.equal(toErrorText("plain"), "plain");
  assert.equal(toErrorText(undefined), "undefined");
  assert.equal(toErrorText(null), "null");
});
