/**
 * The portal's throttles against lockout (issue 25, "the existing throttle's rules against
 * lockout"): strangers on other networks cannot keep a user from signing in, verifying,
 * resetting or asking for mail from a network the user signed in from; one network guessing is
 * still blocked. Over the real handler, the test store (both backends) and a real SMTP server.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PORTAL_THROTTLE_RULES } from "../../src/auth/portal/portal_throttle.ts";
import { readCode } from "./_smtp.ts";
import { type PortalRig, postFrom, startPortalRig } from "./_portal.ts";
import { NEW_PASSWORD, PASSWORD } from "./_portal_answers.ts";

const VICTIM_NET = "198.51.100.";

/** A stranger's address on network `i` (each its own /24 and /64). */
const stranger = (i: number) => i % 2 ? `10.${i >> 8}.${i & 255}.9` : `2001:db8:${i}::9`;

/** Signs `email` up and verifies it from the victim's network: that network becomes known. */
async function activeVictim(rig: PortalRig, email: string) {
  assert.equal(
    (await postFrom(rig, `${VICTIM_NET}7`, "/signup", { email, password: PASSWORD })).status,
    202,
  );
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  const verified = await postFrom(rig, `${VICTIM_NET}7`, "/verify", {
    email,
    code,
    password: PASSWORD,
  });
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  assert.equal(verified.body.state, "active");
}

function assertThrottled(
  answer: { status: number; retryAfter: string | null; body: { error: { code: string } } },
) {
  assert.equal(answer.status, 429, JSON.stringify(answer.body));
  assert.equal(answer.body.error.code, "too_many_attempts");
  assert.match(answer.retryAfter ?? "", /^[1-9]\d*$/);
}

Deno.test("[e2e] portal lockout: strangers on other networks cannot block the user's sign-in", async () => {
  await using rig = await startPortalRig({
    throttleRules: {
      ...PORTAL_THROTTLE_RULES,
      signInCeiling: {
        threshold: 15,
        baseDelayMs: 60_000,
        maxDelayMs: 60_000,
        windowMs: 3_600_000,
      },
    },
  });
  const email = "victim@example.org";
  await activeVictim(rig, email);
  // The reviewer's case: 10 wrong sign-ins from 10 networks; then a fresh network, the right password.
  for (let i = 1; i <= 10; i++) {
    const answer = await postFrom(rig, stranger(i), "/signin", {
      email,
      password: `wrong guess ${i}!`,
    });
    assert.equal(answer.status, 401);
    assert.equal(answer.body.error.code, "invalid_credentials");
  }
  let answer = await postFrom(rig, "192.0.2.77", "/signin", { email, password: PASSWORD });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.match(answer.body.csrf_token, /^[A-Za-z0-9_-]{43}$/);
  // Past the e-mail's ceiling, newcomers wait; the networks the user signed in from do not.
  for (let i = 11; i <= 20; i++) {
    await postFrom(rig, stranger(i), "/signin", { email, password: `wrong guess ${i}!` });
  }
  assertThrottled(await postFrom(rig, stranger(21), "/signin", { email, password: PASSWORD }));
  answer = await postFrom(rig, `${VICTIM_NET}7`, "/signin", { email, password: PASSWORD });
  assert.equal(answer.status, 200, "a known address is exempt from the ceiling");
  answer = await postFrom(rig, "192.0.2.77", "/signin", { email, password: PASSWORD });
  assert.equal(answer.status, 200, "so is the fresh address it signed in from above");
  // Its /24 neighbours are not known (known_client_test.ts).
  assertThrottled(await postFrom(rig, `${VICTIM_NET}8`, "/signin", { email, password: PASSWORD }));
  const signedIn = (await rig.app.store.listAudit()).filter((row) =>
    row.action === "portal.signed_in"
  );
  assert.deepEqual(
    signedIn.map((row) => row.detail.client),
    [`${VICTIM_NET}7`, "192.0.2.77", `${VICTIM_NET}7`, "192.0.2.77"],
  );
});

Deno.test("[e2e] portal lockout: guessing from one network is still blocked, for that network", async () => {
  await using rig = await startPortalRig();
  const email = "target@example.org";
  await activeVictim(rig, email);
  // Ten addresses of one /24 share the e-mail × network counter.
  for (let i = 1; i <= 10; i++) {
    const answer = await postFrom(rig, `203.0.113.${i}`, "/signin", {
      email,
      password: `wrong guess ${i}!`,
    });
    assert.equal(answer.status, 401);
  }
  const blocked = await postFrom(rig, "203.0.113.200", "/signin", { email, password: PASSWORD });
  assertThrottled(blocked);
  assert.equal(blocked.retryAfter, "1", "1 s after the 10th failure, then doubling");
  const other = await postFrom(rig, "2001:db8:1::5", "/signin", { email, password: PASSWORD });
  assert.equal(other.status, 200, "another network signs in");
  const rows = await rig.app.store.listLoginFailures(rig.app.clock.now());
  assert.ok(rows.some((row) => row.subject.endsWith(":203.0.113.0/24") && row.failures === 10));
  assert.ok(
    rows.some((row) =>
      row.subject.startsWith("portal-known:") && row.subject.endsWith("2001:db8:1:0::/64")
    ),
  );
});

Deno.test("[e2e] portal lockout: wrong codes from other networks block neither verification nor reset", async () => {
  await using rig = await startPortalRig({
    throttleRules: {
      ...PORTAL_THROTTLE_RULES,
      signIn: { threshold: 2, baseDelayMs: 60_000, maxDelayMs: 60_000, windowMs: 3_600_000 },
    },
  });
  const email = "pending@example.org";
  assert.equal(
    (await postFrom(rig, `${VICTIM_NET}7`, "/signup", { email, password: PASSWORD })).status,
    202,
  );
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  // A stranger's network is blocked after two wrong codes; its third try gets 429 (not counted).
  for (const expected of [400, 400, 429]) {
    const answer = await postFrom(rig, stranger(1), "/verify", {
      email,
      code: "AAAAA-BBBBB",
      password: PASSWORD,
    });
    assert.equal(answer.status, expected);
  }
  const verified = await postFrom(rig, `${VICTIM_NET}7`, "/verify", {
    email,
    code,
    password: PASSWORD,
  });
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  assert.equal((await rig.app.store.findUserByEmail(email))?.disabled, false);

  assert.equal((await postFrom(rig, `${VICTIM_NET}7`, "/forgot", { email })).status, 202);
  const reset = readCode(await rig.smtp.waitFor(email, "Reset"));
  for (const expected of [400, 400, 429]) {
    const answer = await postFrom(rig, stranger(3), "/reset", {
      email,
      code: "AAAAA-BBBBB",
      password: NEW_PASSWORD,
    });
    assert.equal(answer.status, expected);
  }
  const done = await postFrom(rig, `${VICTIM_NET}9`, "/reset", {
    email,
    code: reset,
    password: NEW_PASSWORD,
  });
  assert.equal(done.status, 200, JSON.stringify(done.body));
  assert.equal(
    (await postFrom(rig, "192.0.2.5", "/signin", { email, password: NEW_PASSWORD })).status,
    200,
  );
});

Deno.test("[e2e] portal lockout: strangers' mail requests hold back their own network, then newcomers, never the user's", async () => {
  await using rig = await startPortalRig();
  const email = "inbox@example.org";
  await activeVictim(rig, email);
  // One network reaches its own limit of 5 for the address; the 6th request waits.
  for (let i = 1; i <= 5; i++) {
    assert.equal((await postFrom(rig, `203.0.113.${i}`, "/forgot", { email })).status, 202);
  }
  const held = await postFrom(rig, "203.0.113.99", "/forgot", { email });
  assertThrottled(held);
  assert.equal(held.retryAfter, "60");
  // Other networks are not held back by it, up to the address's ceiling of 20 (the sign-up's
  // mail, the five, these fourteen).
  for (let i = 1; i <= 14; i++) {
    assert.equal((await postFrom(rig, stranger(i), "/forgot", { email })).status, 202);
  }
  assertThrottled(await postFrom(rig, stranger(20), "/signup", { email, password: PASSWORD }));
  const own = await postFrom(rig, `${VICTIM_NET}7`, "/forgot", { email });
  assert.equal(own.status, 202, JSON.stringify(own.body));
  assert.equal(own.body.status, "accepted");
  // The strangers' nineteen codes and the user's: the user's is the live one.
  const mail = await rig.smtp.waitFor(email, "Reset", { skip: 19 });
  const done = await postFrom(rig, `${VICTIM_NET}7`, "/reset", {
    email,
    code: readCode(mail),
    password: NEW_PASSWORD,
  });
  assert.equal(done.status, 200, JSON.stringify(done.body));
});

Deno.test("[e2e] portal lockout: a wrong password at change of address counts nothing against the target", async () => {
  await using rig = await startPortalRig();
  const browser = rig.browser();
  await activeVictim(rig, "mover@example.org");
  await browser.signIn("mover@example.org", PASSWORD);
  const target = "someone@example.org";
  for (let i = 1; i <= 6; i++) {
    const response = await browser.call("POST", "/email", {
      email: target,
      password: `wrong ${i} password`,
    });
    assert.equal(response.status, 401);
    assert.equal((await response.json()).error.code, "invalid_credentials");
  }
  const signUp = await postFrom(rig, "192.0.2.40", "/signup", {
    email: target,
    password: PASSWORD,
  });
  assert.equal(signUp.status, 202, JSON.stringify(signUp.body));
  const rows = await rig.app.store.listLoginFailures(rig.app.clock.now());
  assert.equal(rows.find((row) => row.subject.startsWith("portal-mail:"))?.failures, 1);
});
