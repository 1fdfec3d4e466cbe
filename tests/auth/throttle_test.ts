/** The throttle's pure rules: when failures block, for how long, and which subject they count. */
import assert from "node:assert/strict";
import {
  ACCOUNT_THROTTLE,
  nextFailures,
  toClientNetwork,
  toClientSubject,
} from "../../src/auth/throttle.ts";

Deno.test("nextFailures() blocks from the threshold on, doubling up to the cap", () => {
  const now = 1_000_000;
  let row = undefined;
  const delays: number[] = [];
  for (let i = 1; i <= 16; i++) {
    row = nextFailures(row, "key:1", ACCOUNT_THROTTLE, now);
    delays.push(row.blockedUntil === 0 ? 0 : row.blockedUntil - now);
    assert.equal(row.forgetAt, now + ACCOUNT_THROTTLE.windowMs);
  }
  assert.deepEqual(delays.slice(0, 4), [0, 0, 0, 0]);
  assert.deepEqual(delays.slice(4, 10), [1000, 2000, 4000, 8000, 16000, 32000]);
  assert.equal(delays.at(-1), 15 * 60_000);
});

Deno.test("toClientNetwork() reduces IPv6 to its /64 and unmaps IPv4", () => {
  assert.equal(toClientNetwork("192.0.2.7"), "192.0.2.7");
  assert.equal(toClientNetwork("::ffff:192.0.2.7"), "192.0.2.7");
  assert.equal(toClientNetwork("2001:db8:0:1:aaaa::1"), "2001:db8:0:1::/64");
  assert.equal(toClientNetwork("[2001:DB8:0:1:ffff:ffff:ffff:ffff]"), "2001:db8:0:1::/64");
  assert.equal(toClientNetwork("::1"), "0:0:0:0::/64");
  assert.equal(toClientNetwork("fe80::1%eth0"), "fe80:0:0:0::/64");
  assert.equal(toClientNetwork("unknown"), "unknown");
  assert.equal(toClientSubject("x".repeat(300)).length, 128);
});
