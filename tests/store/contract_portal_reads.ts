/**
 * The store contract's portal reads that join: the users whose accounts are in a state (the
 * pending-approval list), and a session with its user and account (a signed-in request's one
 * read).
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashSecret } from "../../src/auth/credentials.ts";
import type { PortalAccountState, Store } from "../../src/store/store.ts";
import { type ContractTest, HOUR, NO_AUDIT, T0 } from "./_contract_fixtures.ts";
import { MAIL } from "./contract_portal.ts";

async function addPortalUser(store: Store, email: string, now: number, state: PortalAccountState) {
  return await store.insertPortalUser(
    { email, passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
    { now, state, mail: MAIL, ...NO_AUDIT },
  );
}

/** Registers the tests with the contract's `test`. */
export function registerPortalReadTests(test: ContractTest): void {
  test("listPortalUsers() lists the users whose account is in a state, oldest account first", async ({ store }) => {
    const late = await addPortalUser(store, "late@b.org", T0 + 2, "pending_approval");
    const early = await addPortalUser(store, "early@b.org", T0, "pending_approval");
    const tied = await addPortalUser(store, "tied@b.org", T0 + 2, "pending_approval");
    await addPortalUser(store, "active@b.org", T0, "active");
    await addPortalUser(store, "unverified@b.org", T0, "pending_verification");
    await store.insertUser(
      { email: "operators@b.org", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
      { now: T0, ...NO_AUDIT },
    );
    const pending = await store.listPortalUsers("pending_approval");
    assert.deepEqual(pending.map(({ user }) => user.email), [
      "early@b.org",
      "late@b.org",
      "tied@b.org",
    ]);
    assert.deepEqual(pending[0], {
      user: await store.findUserById(early.id),
      account: await store.findPortalAccount(early.id),
    });
    assert.deepEqual(pending[0].account, {
      userId: early.id,
      state: "pending_approval",
      createdAt: T0,
      userHeld: true,
    });
    assert.ok(late.id < tied.id, "a tie goes by user id");
    assert.deepEqual(
      (await store.listPortalUsers("active")).map(({ user }) => user.email),
      ["active@b.org"],
    );
    await store.updatePortalState(early.id, { now: T0 + 3, state: "active", ...NO_AUDIT });
    assert.deepEqual(
      (await store.listPortalUsers("pending_approval")).map(({ user }) => user.id),
      [late.id, tied.id],
    );
  });

  test("findPortalSessionUser() reads a live session with its user and account, in one read", async ({ store }) => {
    const user = await addPortalUser(store, "signed@b.org", T0, "active");
    const operators = await store.insertUser(
      { email: "operators@b.org", passwordHash: "$argon2id$x", tokenTimeoutSeconds: null },
      { now: T0, ...NO_AUDIT },
    );
    const session = { now: T0, userId: user.id, expiresAt: T0 + HOUR, ...NO_AUDIT };
    await store.insertPortalSession(hashSecret("s1"), session);
    await store.insertPortalSession(hashSecret("s2"), { ...session, userId: operators.id });

    assert.deepEqual(await store.findPortalSessionUser(hashSecret("s1"), T0 + 1), {
      session: { userId: user.id, createdAt: T0, expiresAt: T0 + HOUR },
      user: await store.findUserById(user.id),
      account: await store.findPortalAccount(user.id),
    });
    assert.deepEqual(await store.findPortalSessionUser(hashSecret("s2"), T0 + 1), {
      session: { userId: operators.id, createdAt: T0, expiresAt: T0 + HOUR },
      user: await store.findUserById(operators.id),
    }, "an operator's user has no account");
    assert.equal(await store.findPortalSessionUser(hashSecret("s1"), T0 + HOUR), undefined);
    assert.equal(await store.findPortalSessionUser(hashSecret("nope"), T0 + 1), undefined);
    await store.deletePortalSession(hashSecret("s1"), { now: T0, ...NO_AUDIT });
    assert.equal(await store.findPortalSessionUser(hashSecret("s1"), T0 + 1), undefined);
  });
}
