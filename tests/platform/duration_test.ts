import assert from "node:assert/strict";
import { formatDuration, parseDuration } from "../../src/platform/duration.ts";

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

Deno.test("parseDuration() refuses a duration past 10000000d, whose end no Date can hold", () => {
  assert.equal(parseDuration("10000000d"), 864_000_000_000);
  assert.equal(parseDuration("240000000h"), 864_000_000_000);
  for (const text of ["10000001d", "99999999d", "240000001h", "999999999h"]) {
    assert.throws(() => parseDuration(text), /at most 10000000d/, text);
  }
  // The longest duration from a far-off now is still a time a Date can hold.
  const end = new Date(Date.parse("2200-01-01T00:00:00Z") + parseDuration("10000000d") * 1000);
  assert.ok(Number.isFinite(end.getTime()));
});

Deno.test("formatDuration() uses the largest unit that divides evenly", () => {
  assert.equal(formatDuration(36000), "10h");
  assert.equal(formatDuration(604800), "7d");
  assert.equal(formatDuration(90), "90s");
  assert.equal(formatDuration(120), "2m");
});
