import assert from "node:assert/strict";
import { formatDuration, parseDuration } from "../src/platform/duration.ts";

Deno.test("parseDuration() reads s, m, h and d", () => {
  assert.equal(parseDuration("90s"), 90);
  assert.equal(parseDuration("15m"), 900);
  assert.equal(parseDuration("10h"), 36000);
  assert.equal(parseDuration("7d"), 604800);
});

Deno.test("parseDuration() refuses zero, signs, spaces, decimals and unknown units", () => {
  for (const text of ["0s", "-1h", " 1h", "1.5h", "10", "h", "1w", "1H", "", "01h"]) {
    assert.throws(() => parseDuration(text), SyntaxError, text);
  }
});

Deno.test("formatDuration() uses the largest unit that divides evenly", () => {
  assert.equal(formatDuration(36000), "10h");
  assert.equal(formatDuration(604800), "7d");
  assert.equal(formatDuration(90), "90s");
  assert.equal(formatDuration(120), "2m");
});
