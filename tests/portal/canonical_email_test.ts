/**
 * One mailbox, one account, one throttle budget (issue 25's review): every portal lookup by
 * e-mail (sign-up, sign-in, verification, forgot-password, reset, the throttle's keys) uses the
 * form sign-up stores, so spellings of one address (letter case, NFC, a domain as IDNA spells
 * it) never reach two accounts or two budgets.
 *
 * @module
 */
import assert from "node:assert/strict";
import { isAllowedDomain, toPortalEmail } from "../../src/auth/portal/mail_address.ts";
import { readCode } from "./_smtp.ts";
import { postFrom, startPortalRig } from "./_portal.ts";

const PASSWORD = "correct horse battery";

Deno.test("toPortalEmail() gives spellings of one mailbox one form", () => {
  const umlaut = "dev@ex\u00e4mple.org";
  for (
    const spelling of [
      "Dev@EX\u00c4MPLE.org",
      "dev@exa\u0308mple.org", // NFD
      "dev@xn--exmple-cua.org",
      "DEV@XN--EXMPLE-CUA.ORG",
      "dev@\uff45x\u00e4mple.org", // a full-width e
    ]
  ) assert.equal(toPortalEmail(spelling), umlaut, spelling);
  assert.equal(
    toPortalEmail("Dev@\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.org"),
    "dev@example.org",
  );
  // The local part is the mailbox owner's: only its letter case and NFC are folded.
  assert.equal(toPortalEmail("Dev.Ops+x@example.org"), "dev.ops+x@example.org");
  // Not an address: as normalised, never an error (a lookup finds nothing).
  assert.equal(toPortalEmail("no at sign"), "no at sign");
  assert.equal(toPortalEmail(undefined), "");
  assert.equal(toPortalEmail("x".repeat(300)).length, 254);
});

Deno.test("isAllowedDomain() compares a domain in its ASCII form, however it was spelled", () => {
  const policy = { mode: "domains", domains: ["xn--exmple-cua.org", "example.com"] };
  assert.equal(isAllowedDomain("dev@ex\u00e4mple.org", policy), true);
  assert.equal(isAllowedDomain("dev@example.com", policy), true);
  assert.equal(isAllowedDomain("dev@dev.example.com", policy), false, "exact domains");
  assert.equal(isAllowedDomain("dev@example.org", policy), false);
  assert.equal(isAllowedDomain("dev@example.org", { mode: "open" }), true);
});

Deno.test("[e2e] portal: two spellings of one address sign up one account, verify and reset it", async () => {
  await using rig = await startPortalRig();
  const email = "dev@example.org";
  const spellings = ["Dev@EXAMPLE.org", "dev@\uff45xample.org", "DEV@example.ORG"];
  assert.equal(
    (await postFrom(rig, "192.0.2.1", "/signup", { email: spellings[0], password: PASSWORD }))
      .status,
    202,
  );
  assert.equal(
    (await postFrom(rig, "192.0.2.1", "/signup", { email: spellings[1], password: PASSWORD }))
      .status,
    202,
  );
  const users = (await rig.app.store.listUsers()).map((user) => user.email);
  assert.deepEqual(users, [email], "one account, stored in the canonical form");
  // The second sign-up added a candidate to that account: two codes, to the one address.
  const code = readCode(await rig.smtp.waitFor(email, "Verify", { skip: 1 }));
  const verified = await postFrom(rig, "192.0.2.1", "/verify", {
    email: spellings[2],
    code,
    password: PASSWORD,
  });
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  assert.equal(verified.body.state, "active");
  const signedIn = await postFrom(rig, "192.0.2.1", "/signin", {
    email: spellings[1],
    password: PASSWORD,
  });
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  assert.equal((await postFrom(rig, "192.0.2.1", "/forgot", { email: spellings[1] })).status, 202);
  const reset = readCode(await rig.smtp.waitFor(email, "Reset"));
  const done = await postFrom(rig, "192.0.2.1", "/reset", {
    email: spellings[0],
    code: reset,
    password: "a brand new secret 7",
  });
  assert.equal(done.status, 200, JSON.stringify(done.body));
});

Deno.test("[e2e] portal: wrong sign-ins under several spellings share one throttle budget", async () => {
  await using rig = await startPortalRig();
  const spellings = [
    "dev@ex\u00e4mple.org",
    "Dev@exa\u0308mple.org",
    "dev@xn--exmple-cua.org",
    "dev@\uff45x\u00e4mple.org",
  ];
  for (const email of spellings) {
    const answer = await postFrom(rig, "192.0.2.9", "/signin", { email, password: "a wrong one!" });
    assert.equal(answer.status, 401);
  }
  const rows = (await rig.app.store.listLoginFailures(rig.app.clock.now()))
    .filter((row) => row.subject.startsWith("portal-login:"));
  assert.deepEqual(rows.map((row) => row.failures), [4], rows.map((row) => row.subject).join());
});
