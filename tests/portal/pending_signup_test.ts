/**
 * A sign-up repeated while the address waits for verification commits as a first sign-up does
 * (issue 25, timing of pending addresses): it adds a second code bound to its own password and
 * changes no user row, so it neither bumps the grant epoch nor waits for the durability sync that
 * a grant change costs, and the answer takes no longer than a fresh address's. Replacing an
 * unverified user's password (`replacePortalCode`) is no grant change either. A user who is not
 * disabled still gets the bump. Both backends (the test store).
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import { startPortalRig } from "./_portal.ts";
import { PASSWORD } from "./_portal_answers.ts";

Deno.test("[e2e] portal: a repeated sign-up of a pending address is no grant change", async () => {
  await using rig = await startPortalRig();
  const { store } = rig.app;
  const email = "pending@example.org";
  const signUp = async (password: string) => {
    const response = await rig.api("POST", "/signup", { email, password });
    assert.equal(response.status, 202);
    assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal((await response.json()).status, "accepted");
  };
  await signUp(PASSWORD);
  const first = (await store.findUserByEmail(email))!;
  assert.equal(first.disabled, true);
  const epoch = store.readGrantEpoch();
  await signUp("another long passphrase 7");
  const again = (await store.findUserByEmail(email))!;
  // The owner's pending password stays; the new one is bound to a second code of its own.
  assert.equal(again.passwordHash, first.passwordHash, "the first pending password is kept");
  const codes = await store.findPortalCodes(again.id, "verify", rig.app.clock.now());
  assert.equal(codes.length, 2);
  assert.equal(codes.filter((code) => code.passwordHash !== undefined).length, 2);
  assert.equal((await store.findPortalAccount(again.id))?.state, "pending_verification");
  assert.equal(store.readGrantEpoch(), epoch, "no grant epoch bump for a disabled user");
});

Deno.test("[e2e] portal store: a new password for an enabled user with a code is a grant change", async () => {
  await using rig = await startPortalRig();
  const { store, clock } = rig.app;
  const user = await store.insertPortalUser(
    { email: "held@example.org", passwordHash: "$argon2id$old", tokenTimeoutSeconds: null },
    {
      now: clock.now(),
      state: "active",
      mail: { recipient: "held@example.org", subject: "-", text: "-" },
      audit: undefined,
    },
  );
  assert.equal(user.disabled, false);
  const epoch = store.readGrantEpoch();
  await store.replacePortalCode(user.id, {
    now: clock.now(),
    code: { purpose: "verify", codeHash: hashSecret("c1"), expiresAt: clock.now() + 60_000 },
    mail: { recipient: "held@example.org", subject: "-", text: "-" },
    passwordHash: "$argon2id$new",
    audit: undefined,
  });
  assert.equal((await store.findUserById(user.id))?.passwordHash, "$argon2id$new");
  assert.notEqual(store.readGrantEpoch(), epoch, "an enabled user's password change still bumps");
});
