/**
 * A stranger cannot keep a pending address from being verified (issue 25, review 3): wrong
 * codes count on the throttle, never against the owner's candidate; strangers' sign-ups push
 * out only their own network's candidates; the mail counter the owner's re-sign-up meets is
 * their own network's; and a first sign-up that loses a race still gets its code. Real handler,
 * test store (both backends), real SMTP server and mailer.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { PortalAccountDeps } from "../../src/auth/portal/account_deps.ts";
import { signUp } from "../../src/auth/portal/accounts.ts";
import { createPortalThrottle } from "../../src/auth/portal/portal_throttle.ts";
import { createPasswordHasher } from "../../src/passwords/passwords.ts";
import { changingBefore } from "../_helpers/store_before.ts";
import { readCode } from "./_smtp.ts";
import { ORIGIN, postFrom, startPortalRig, TEST_CODE_KEY } from "./_portal.ts";
import {
  OTHER_PASSWORD as STRANGER_PASSWORD,
  PASSWORD as OWNER_PASSWORD,
} from "./_portal_answers.ts";

const OWNER = "198.51.100.7";

Deno.test("[e2e] five wrong codes from a stranger do not end the owner's verification code", async () => {
  await using rig = await startPortalRig();
  const email = "owner@example.org";
  let answer = await postFrom(rig, OWNER, "/signup", { email, password: OWNER_PASSWORD });
  assert.equal(answer.status, 202);
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  for (let i = 0; i < 5; i++) {
    answer = await postFrom(rig, "203.0.113.9", "/verify", {
      email,
      code: "AAAAA-AAAAA",
      password: STRANGER_PASSWORD,
    });
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error.code, "invalid_request");
  }
  const user = (await rig.app.store.findUserByEmail(email))!;
  const live = await rig.app.store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  assert.deepEqual(live.map((stored) => stored.attempts), [0], "the guesses count on no code");
  const failed = (await rig.app.store.listAudit()).filter((row) =>
    row.action === "portal.code_failed"
  );
  assert.equal(failed.length, 5, "each guess is still audited");
  answer = await postFrom(rig, OWNER, "/verify", { email, code, password: OWNER_PASSWORD });
  assert.equal(answer.status, 200);
  assert.equal(answer.body.state, "active");
});

Deno.test("[e2e] a right code with a wrong password still counts against that code", async () => {
  await using rig = await startPortalRig();
  const email = "owner@example.org";
  assert.equal(
    (await postFrom(rig, OWNER, "/signup", { email, password: OWNER_PASSWORD })).status,
    202,
  );
  const code = readCode(await rig.smtp.waitFor(email, "Verify"));
  const answer = await postFrom(rig, OWNER, "/verify", {
    email,
    code,
    password: STRANGER_PASSWORD,
  });
  assert.equal(answer.status, 400);
  const user = (await rig.app.store.findUserByEmail(email))!;
  const live = await rig.app.store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  assert.deepEqual(live.map((stored) => stored.attempts), [1]);
});

Deno.test("[e2e] a first sign-up that loses the race to another gets its own candidate code", async () => {
  await using rig = await startPortalRig();
  const email = "racer@example.org";
  const store = rig.app.store;
  const deps: PortalAccountDeps = {
    store,
    clock: rig.app.clock,
    hasher: createPasswordHasher(),
    throttle: createPortalThrottle({ store, clock: rig.app.clock, key: TEST_CODE_KEY }),
    mode: "open",
    codeKey: TEST_CODE_KEY,
  };
  const client = { address: "192.0.2.1", links: { origin: ORIGIN } };
  // The other sign-up commits between this one's read (no account yet) and its insert.
  let raced = false;
  const racing = changingBefore(store, "insertPortalUser", async () => {
    raced = true;
    await signUp(deps, client, { email, password: STRANGER_PASSWORD });
  });
  await signUp({ ...deps, store: racing }, client, { email, password: OWNER_PASSWORD });
  assert.ok(raced);
  const user = (await store.findUserByEmail(email))!;
  const live = await store.findPortalCodes(user.id, "verify", rig.app.clock.now());
  assert.equal(live.length, 2, "the loser's code is a candidate beside the winner's");
  const audit = (await store.listAudit()).map((row) => row.action);
  assert.deepEqual(audit.filter((action) => action.startsWith("portal.sign")), [
    "portal.signed_up",
    "portal.sign_up_repeated",
  ]);
  // Two mails (in either order); one of the codes verifies with the loser's password.
  const codes = [
    readCode(await rig.smtp.waitFor(email, "Verify")),
    readCode(await rig.smtp.waitFor(email, "Verify", { skip: 1 })),
  ];
  assert.notEqual(codes[0], codes[1]);
  const statuses: number[] = [];
  for (const code of codes) {
    const answer = await postFrom(rig, OWNER, "/verify", { email, code, password: OWNER_PASSWORD });
    statuses.push(answer.status);
    if (answer.status === 200) assert.equal(answer.body.state, "active");
  }
  assert.deepEqual(statuses.toSorted(), [200, 400]);
});

Deno.test("[e2e] strangers' sign-ups from other networks leave the owner's re-sign-up unthrottled", async () => {
  await using rig = await startPortalRig();
  const email = "owner2@example.org";
  assert.equal(
    (await postFrom(rig, OWNER, "/signup", { email, password: OWNER_PASSWORD })).status,
    202,
  );
  for (let i = 1; i <= 5; i++) {
    const answer = await postFrom(rig, `203.0.${i}.9`, "/signup", {
      email,
      password: `${STRANGER_PASSWORD} ${i}`,
    });
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
  }
  // Before, the address's one mail counter (5) held the owner back too.
  const again = await postFrom(rig, OWNER, "/signup", { email, password: OWNER_PASSWORD });
  assert.equal(again.status, 202, JSON.stringify(again.body));
  assert.equal(again.body.status, "accepted");
  const code = readCode(await rig.smtp.waitFor(email, "Verify", { skip: 6 }));
  const answer = await postFrom(rig, OWNER, "/verify", { email, code, password: OWNER_PASSWORD });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
});
