/**
 * The known-client exemption from the per-e-mail ceilings (issue 25's review): a successful
 * sign-in makes known its exact IPv4 address or its IPv6 /64, never the whole IPv4 /24, which
 * strangers on the same ISP or campus share. On the real throttle over the test store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { AuthError } from "../../src/auth/errors.ts";
import {
  createPortalThrottle,
  PORTAL_THROTTLE_RULES,
  type PortalThrottle,
} from "../../src/auth/portal/portal_throttle.ts";
import { createFakeClock } from "../_helpers/fake_clock.ts";
import { openTestStore } from "../_helpers/store.ts";
import { TEST_CODE_KEY } from "./_portal.ts";

const EMAIL = "owner@example.org";
/** A ceiling of 3 failures from anywhere, per-network counters out of the way. */
const RULES = {
  ...PORTAL_THROTTLE_RULES,
  signIn: { threshold: 1000, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 3_600_000 },
  client: { threshold: 1000, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 3_600_000 },
  signInCeiling: { threshold: 3, baseDelayMs: 60_000, maxDelayMs: 60_000, windowMs: 3_600_000 },
  mail: { threshold: 1000, baseDelayMs: 1000, maxDelayMs: 1000, windowMs: 3_600_000 },
  mailCeiling: { threshold: 3, baseDelayMs: 60_000, maxDelayMs: 60_000, windowMs: 3_600_000 },
};

async function isHeld(throttle: PortalThrottle, counter: "signIn" | "mail", client: string) {
  try {
    await throttle.check(counter, client, EMAIL);
    return false;
  } catch (error) {
    assert.ok(error instanceof AuthError && error.code === "too_many_attempts", String(error));
    return true;
  }
}

for (const counter of ["signIn", "mail"] as const) {
  Deno.test(`portal throttle: a sign-in makes known its IPv4 address and IPv6 /64, not the /24 (${counter} ceiling)`, async () => {
    await using opened = await openTestStore();
    const throttle = createPortalThrottle({
      store: opened.store,
      clock: createFakeClock(),
      key: TEST_CODE_KEY,
      rules: RULES,
    });
    await throttle.succeeded("198.51.100.7", EMAIL);
    await throttle.succeeded("2001:db8:5:6::1", EMAIL);
    // Strangers spread over other networks reach the e-mail's ceiling.
    for (let i = 1; i <= 3; i++) await throttle.count(counter, `192.0.2.${i * 40}`, EMAIL);

    assert.equal(await isHeld(throttle, counter, "192.0.2.200"), true, "a newcomer waits");
    assert.equal(await isHeld(throttle, counter, "198.51.100.7"), false, "the known address");
    assert.equal(await isHeld(throttle, counter, "::ffff:198.51.100.7"), false, "mapped");
    assert.equal(await isHeld(throttle, counter, "198.51.100.8"), true, "its /24 neighbour waits");
    assert.equal(await isHeld(throttle, counter, "2001:db8:5:6::99"), false, "the known /64");
    assert.equal(await isHeld(throttle, counter, "2001:db8:5:7::1"), true, "another /64 waits");

    const markers = (await opened.store.listLoginFailures(createFakeClock().now()))
      .map((row) => row.subject).filter((subject) => subject.startsWith("portal-known:"));
    assert.equal(markers.length, 2);
    assert.ok(markers.some((subject) => subject.endsWith(":198.51.100.7")), markers.join(" "));
    assert.ok(markers.some((subject) => subject.endsWith(":2001:db8:5:6::/64")), markers.join(" "));
  });
}
